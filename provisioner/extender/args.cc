#include "extender/args.h"

#include <algorithm>
#include <unordered_set>

#include <nlohmann/json.hpp>

namespace nodevol::provisioner {

using nlohmann::json;

namespace {

// Deepest nesting of [ and { outside strings; stops counting past `limit`.
int Depth(std::string_view s, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

Status Invalid(const std::string& what) { return Status::InvalidArgument("extender request: " + what); }

// What a place in the document is to us. Anything else is skipped as it
// is read: a request holds in memory only the fields below, however large
// the rest of it (a 16 MiB body parsed whole peaked at 600 MB, issue 57).
enum class Role {
  kSkip, kTop, kPod, kMeta, kName, kNamespace, kUid, kSpec, kVolumes, kVolume, kVolumeName, kClaim, kClaimName,
  kEphemeral, kNodeNames, kNodeName, kNodes, kItems, kItem, kItemMeta, kItemName,
};

Role Child(Role parent, std::string_view key) {
  switch (parent) {
    case Role::kTop:
      return key == "Pod" ? Role::kPod : key == "NodeNames" ? Role::kNodeNames : key == "Nodes" ? Role::kNodes
                                                                                                : Role::kSkip;
    case Role::kPod: return key == "metadata" ? Role::kMeta : key == "spec" ? Role::kSpec : Role::kSkip;
    case Role::kMeta:
      return key == "name" ? Role::kName : key == "namespace" ? Role::kNamespace : key == "uid" ? Role::kUid
                                                                                                : Role::kSkip;
    case Role::kSpec: return key == "volumes" ? Role::kVolumes : Role::kSkip;
    case Role::kVolume:
      return key == "name" ? Role::kVolumeName
             : key == "persistentVolumeClaim" ? Role::kClaim
             : key == "ephemeral"             ? Role::kEphemeral
                                              : Role::kSkip;
    case Role::kClaim: return key == "claimName" ? Role::kClaimName : Role::kSkip;
    case Role::kNodes: return key == "items" ? Role::kItems : Role::kSkip;
    case Role::kItem: return key == "metadata" ? Role::kItemMeta : Role::kSkip;
    case Role::kItemMeta: return key == "name" ? Role::kItemName : Role::kSkip;
    default: return Role::kSkip;
  }
}

Role Element(Role array) {
  switch (array) {
    case Role::kVolumes: return Role::kVolume;
    case Role::kNodeNames: return Role::kNodeName;
    case Role::kItems: return Role::kItem;
    default: return Role::kSkip;
  }
}

// How a field the decoder reads was given (a later duplicate key wins, as
// in a JSON object).
enum class Shape { kAbsent, kNull, kObject, kArray, kOther };

struct Volume {
  bool claim = false, ephemeral = false;
  std::string name, claim_name;
};

// nlohmann's SAX interface: events in document order, no tree built.
class Reader : public json::json_sax_t {
 public:
  // What was read.
  Shape top = Shape::kAbsent, pod = Shape::kAbsent, meta = Shape::kAbsent, volumes = Shape::kAbsent;
  Shape node_names = Shape::kAbsent, nodes = Shape::kAbsent, items = Shape::kAbsent;
  std::string name, ns, uid;
  std::vector<Volume> vols;  // those with a claim or an ephemeral template
  std::vector<std::string> names, item_names;
  bool bad_name = false, item_without_name = false, too_many = false;

  bool null() override { return Scalar(Shape::kNull, nullptr); }
  bool boolean(bool) override { return Scalar(Shape::kOther, nullptr); }
  bool number_integer(number_integer_t) override { return Scalar(Shape::kOther, nullptr); }
  bool number_unsigned(number_unsigned_t) override { return Scalar(Shape::kOther, nullptr); }
  bool number_float(number_float_t, const string_t&) override { return Scalar(Shape::kOther, nullptr); }
  bool string(string_t& s) override { return Scalar(Shape::kOther, &s); }
  bool binary(binary_t&) override { return Scalar(Shape::kOther, nullptr); }

  bool start_object(std::size_t) override {
    Role r = Next();
    Begin(r, Shape::kObject);
    stack_.push_back({r, true, Role::kSkip});
    return true;
  }
  bool key(string_t& k) override {
    stack_.back().key_role = Child(stack_.back().role, k);
    return true;
  }
  bool end_object() override {
    Role r = stack_.back().role;
    stack_.pop_back();
    if (r == Role::kVolume && !vols.back().claim && !vols.back().ephemeral) vols.pop_back();
    if (r == Role::kItem) {
      // One name an item, the last given (a duplicate key wins).
      if (item_name_.empty()) {
        item_without_name = true;
      } else {
        item_names.push_back(std::move(item_name_));
        if (item_names.size() > kMaxExtenderNodes) return too_many = true, false;
      }
    }
    return true;
  }
  bool start_array(std::size_t) override {
    Role r = Next();
    Begin(r, Shape::kArray);
    stack_.push_back({r, false, Role::kSkip});
    return true;
  }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Frame {
    Role role;
    bool object;
    Role key_role;  // the role of the value of the key just read
  };

  // The role of the value that starts now.
  Role Next() const {
    if (stack_.empty()) return Role::kTop;
    const Frame& f = stack_.back();
    return f.object ? f.key_role : Element(f.role);
  }

  // A value of role r starts, as `shape`: record how it was given, and
  // start over what a duplicate key had given before.
  void Begin(Role r, Shape shape) {
    switch (r) {
      case Role::kTop: top = shape; break;
      case Role::kPod:
        pod = shape;
        meta = volumes = Shape::kAbsent;
        name.clear(), ns.clear(), uid.clear(), vols.clear();
        break;
      case Role::kMeta:
        meta = shape;
        name.clear(), ns.clear(), uid.clear();
        break;
      case Role::kSpec: volumes = Shape::kAbsent, vols.clear(); break;
      case Role::kVolumes: volumes = shape, vols.clear(); break;
      case Role::kVolume:
        if (shape == Shape::kObject) vols.emplace_back();
        break;
      case Role::kClaim: vols.back().claim = true, vols.back().claim_name.clear(); break;
      case Role::kEphemeral: vols.back().ephemeral = true; break;
      case Role::kNodeNames: node_names = shape, names.clear(), bad_name = false; break;
      case Role::kNodeName:
        if (shape == Shape::kObject || shape == Shape::kArray) bad_name = true;  // a scalar is judged in Scalar
        break;
      case Role::kItemMeta: item_name_.clear(); break;  // a later metadata wins whole
      case Role::kName: case Role::kNamespace: case Role::kUid: case Role::kVolumeName: case Role::kClaimName:
        // Not a string (an object, an array): as if empty, and a later
        // duplicate's, as in a JSON object.
        if (shape == Shape::kObject || shape == Shape::kArray) Clear(r);
        break;
      case Role::kNodes: nodes = shape, items = Shape::kAbsent, item_names.clear(), item_without_name = false; break;
      case Role::kItems: items = shape, item_names.clear(), item_without_name = false; break;
      case Role::kItem:
        item_name_.clear();
        if (shape != Shape::kObject) item_without_name = true;
        break;
      default: break;
    }
  }

  bool Scalar(Shape shape, string_t* s) {
    Role r = Next();
    Begin(r, shape);
    const bool str = s != nullptr;
    switch (r) {
      case Role::kName: name = str ? std::move(*s) : ""; break;
      case Role::kNamespace: ns = str ? std::move(*s) : ""; break;
      case Role::kUid: uid = str ? std::move(*s) : ""; break;
      case Role::kVolumeName: vols.back().name = str ? std::move(*s) : ""; break;
      case Role::kClaimName: vols.back().claim_name = str ? std::move(*s) : ""; break;
      case Role::kNodeName:
        if (!str || s->empty()) bad_name = true;
        else names.push_back(std::move(*s));
        if (names.size() > kMaxExtenderNodes) return too_many = true, false;
        break;
      case Role::kItemName: item_name_ = str ? std::move(*s) : ""; break;
      default: break;
    }
    return true;
  }

  // Empties the field of role r (a value that is not a string).
  void Clear(Role r) {
    switch (r) {
      case Role::kName: name.clear(); break;
      case Role::kNamespace: ns.clear(); break;
      case Role::kUid: uid.clear(); break;
      case Role::kVolumeName: vols.back().name.clear(); break;
      case Role::kClaimName: vols.back().claim_name.clear(); break;
      default: break;
    }
  }

  std::vector<Frame> stack_;
  std::string item_name_;  // the name of the Nodes item being read
};

}  // namespace

Status DecodeExtenderArgs(std::string_view body, ExtenderArgs* out) {
  *out = {};
  if (Depth(body, kMaxJsonDepth) > kMaxJsonDepth)
    return Invalid("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  Reader r;
  bool parsed = false;
  try {
    parsed = json::sax_parse(body.begin(), body.end(), &r, json::input_format_t::json, /*strict=*/true);
  } catch (const std::exception&) {  // bad_alloc, or a limit of the library's: the body is refused, not us
    parsed = false;
  }
  if (r.too_many) return Invalid("more than " + std::to_string(kMaxExtenderNodes) + " nodes");
  if (!parsed) return Invalid("not JSON");
  if (r.top != Shape::kObject) return Invalid("not a JSON object");
  if (r.pod != Shape::kObject) return Invalid("no Pod object");
  if (r.meta != Shape::kObject) return Invalid("Pod has no metadata");
  out->pod_name = std::move(r.name);
  out->pod_namespace = std::move(r.ns);
  out->pod_uid = std::move(r.uid);
  if (out->pod_name.empty() || out->pod_namespace.empty()) return Invalid("Pod has no name or namespace");

  if (r.volumes != Shape::kAbsent && r.volumes != Shape::kNull && r.volumes != Shape::kArray)
    return Invalid("Pod spec.volumes is not a list");
  std::unordered_set<std::string> seen;  // 40,000 names took 13 s with a linear search each
  for (auto& v : r.vols) {
    std::string claim;
    if (v.claim) {
      if (v.claim_name.empty()) return Invalid("a persistentVolumeClaim volume has no claimName");
      claim = std::move(v.claim_name);
    } else {
      if (v.name.empty()) return Invalid("an ephemeral volume has no name");
      claim = out->pod_name + "-" + v.name;
    }
    if (seen.insert(claim).second) out->claim_names.push_back(std::move(claim));
  }

  if (r.node_names != Shape::kAbsent && r.node_names != Shape::kNull) {
    if (r.node_names != Shape::kArray) return Invalid("NodeNames is not a list");
    if (r.bad_name) return Invalid("NodeNames holds a non-name");
    out->node_names_given = true;
    out->node_names = std::move(r.names);
  } else if (r.nodes != Shape::kAbsent && r.nodes != Shape::kNull) {
    if (r.nodes != Shape::kObject || r.items != Shape::kArray) return Invalid("Nodes has no items list");
    if (r.item_without_name) return Invalid("a Node in Nodes.items has no name");
    out->node_names = std::move(r.item_names);
  }
  return Status::Ok();
}

}  // namespace nodevol::provisioner
