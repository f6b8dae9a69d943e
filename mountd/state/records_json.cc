#include "state/records_json.h"

#include <nlohmann/json.hpp>

namespace nodevol {
namespace {

using nlohmann::json;

// A file's format decides who may read it (records_json.h): a newer one
// is refused as UNIMPLEMENTED, never mistaken for a corrupt file.
Status CheckFormat(const json& j) {
  const json* f = j.is_object() && j.contains("format") ? &j.at("format") : nullptr;
  if (!f || !f->is_number_integer() || f->get<int64_t>() < 1)
    return Status::FailedPrecondition("no valid \"format\" field");
  if (f->get<int64_t>() > kRecordFormat)
    return Status::Unimplemented("record format " + f->dump() + " is newer than this nodevold reads (up to " +
                                 std::to_string(kRecordFormat) + ")");
  return Status::Ok();
}

const char* kVolumeStates[] = {"creating", "ready", "deleting"};
const char* kPublicationStates[] = {"publishing", "published", "unpublishing"};

template <typename E, size_t N>
bool ParseEnum(const std::string& s, const char* (&names)[N], E* out) {
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

}  // namespace

const char* ToString(VolumeState s) { return kVolumeStates[static_cast<int>(s)]; }
const char* ToString(PublicationState s) { return kPublicationStates[static_cast<int>(s)]; }

std::string VolumeToJson(const VolumeRecord& v) {
  json j = {
      {"format", kRecordFormat},
      {"name", v.spec.name},
      {"pool", v.spec.pool},
      {"size_bytes", v.spec.size_bytes},
      {"fs_type", v.spec.fs_type},
      {"parameters", v.spec.parameters},
      {"backend", v.backend},
      {"state", ToString(v.state)},
      {"ephemeral", v.ephemeral},
      {"created_unix", v.created_unix},
      {"attributes", v.attributes},
  };
  if (v.shared_copy) j["shared_copy"] = true;  // optional: older readers ignore it
  if (v.spec.block) j["block"] = true;  // optional, likewise
  return j.dump(2) + "\n";
}

Status VolumeFromJson(const std::string& text, VolumeRecord* v) {
  try {
    json j = json::parse(text);
    NODEVOL_RETURN_IF_ERROR(CheckFormat(j));
    v->spec.name = j.at("name").get<std::string>();
    v->spec.pool = j.at("pool").get<std::string>();
    v->spec.size_bytes = j.at("size_bytes").get<uint64_t>();
    v->spec.fs_type = j.at("fs_type").get<std::string>();
    v->spec.parameters = j.at("parameters").get<Params>();
    v->backend = j.at("backend").get<std::string>();
    if (!ParseEnum(j.at("state").get<std::string>(), kVolumeStates, &v->state))
      return Status::FailedPrecondition("unknown volume state " + j.at("state").dump());
    v->ephemeral = j.at("ephemeral").get<bool>();
    v->created_unix = j.at("created_unix").get<int64_t>();
    v->attributes = j.at("attributes").get<Params>();
    v->shared_copy = j.contains("shared_copy") && j.at("shared_copy").get<bool>();
    v->spec.block = j.contains("block") && j.at("block").get<bool>();
  } catch (const json::exception& e) {
    return Status::FailedPrecondition(std::string("malformed volume record: ") + e.what());
  }
  return Status::Ok();
}

std::string PublicationToJson(const PublicationRecord& p) {
  json j = {
      {"format", kRecordFormat},
      {"target", p.target},
      {"volume", p.volume},
      {"source", p.source},
      {"state", ToString(p.state)},
      {"read_only", p.read_only},
      {"mount_options", p.mount_options},
      {"fs_group", p.fs_group ? json(*p.fs_group) : json(nullptr)},
      {"pod", {{"uid", p.pod.uid}, {"name", p.pod.name}, {"namespace", p.pod.ns},
               {"service_account", p.pod.service_account}}},
      {"adopted", p.adopted},  // optional: older readers ignore it
  };
  return j.dump(2) + "\n";
}

Status PublicationFromJson(const std::string& text, PublicationRecord* p) {
  try {
    json j = json::parse(text);
    NODEVOL_RETURN_IF_ERROR(CheckFormat(j));
    p->target = j.at("target").get<std::string>();
    p->volume = j.at("volume").get<std::string>();
    p->source = j.at("source").get<std::string>();
    if (!ParseEnum(j.at("state").get<std::string>(), kPublicationStates, &p->state))
      return Status::FailedPrecondition("unknown publication state " + j.at("state").dump());
    p->read_only = j.at("read_only").get<bool>();
    p->mount_options = j.at("mount_options").get<std::vector<std::string>>();
    if (j.at("fs_group").is_null()) p->fs_group.reset();
    else p->fs_group = j.at("fs_group").get<uint32_t>();
    const json& pod = j.at("pod");
    p->pod = {pod.at("uid").get<std::string>(), pod.at("name").get<std::string>(),
              pod.at("namespace").get<std::string>(), pod.at("service_account").get<std::string>()};
    p->adopted = j.contains("adopted") && j.at("adopted").get<bool>();
  } catch (const json::exception& e) {
    return Status::FailedPrecondition(std::string("malformed publication record: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace nodevol
