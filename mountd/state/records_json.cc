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
  const bool from = !v.spec.from_snapshot.empty() || !v.spec.from_volume.empty();
  json j = {
      {"format", from && v.state == VolumeState::kCreating ? 2 : 1},
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
  if (!v.spec.from_snapshot.empty()) j["from_snapshot"] = v.spec.from_snapshot;
  if (!v.spec.from_volume.empty()) j["from_volume"] = v.spec.from_volume;
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
    v->spec.from_snapshot = j.value("from_snapshot", std::string());
    v->spec.from_volume = j.value("from_volume", std::string());
  } catch (const json::exception& e) {
    return Status::FailedPrecondition(std::string("malformed volume record: ") + e.what());
  }
  return Status::Ok();
}

std::string PublicationToJson(const PublicationRecord& p) {
  json j = {
      {"format", 1},
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

std::string SnapshotToJson(const SnapshotRecord& s) {
  json j = {
      {"format", 1},
      {"name", s.name},
      {"source", s.source},
      {"pool", s.pool},
      {"backend", s.backend},
      {"size_bytes", s.size_bytes},
      {"fs_type", s.fs_type},
      {"block", s.block},
      {"state", ToString(s.state)},
      {"created_unix", s.created_unix},
      {"attributes", s.attributes},
  };
  return j.dump(2) + "\n";
}

Status SnapshotFromJson(const std::string& text, SnapshotRecord* s) {
  try {
    json j = json::parse(text);
    NODEVOL_RETURN_IF_ERROR(CheckFormat(j));
    s->name = j.at("name").get<std::string>();
    s->source = j.at("source").get<std::string>();
    s->pool = j.at("pool").get<std::string>();
    s->backend = j.at("backend").get<std::string>();
    s->size_bytes = j.at("size_bytes").get<uint64_t>();
    s->fs_type = j.at("fs_type").get<std::string>();
    s->block = j.at("block").get<bool>();
    if (!ParseEnum(j.at("state").get<std::string>(), kVolumeStates, &s->state))
      return Status::FailedPrecondition("unknown snapshot state " + j.at("state").dump());
    s->created_unix = j.at("created_unix").get<int64_t>();
    s->attributes = j.at("attributes").get<Params>();
  } catch (const json::exception& e) {
    return Status::FailedPrecondition(std::string("malformed snapshot record: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace nodevol
