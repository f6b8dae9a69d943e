// The extender's HTTP face: kube-scheduler's JSON (scheduling-contract.md
// §3; its keys are the Go field names) over the domain in extender.h.
//
//   POST /filter      ExtenderArgs -> ExtenderFilterResult
//   POST /prioritize  ExtenderArgs -> HostPriorityList
//
// Only nodeCacheCapable: true is served (NodeNames in, NodeNames out):
// with full Node objects the answer would have to echo them back, and
// kube-scheduler's cache already has them. A request without NodeNames,
// or one that does not decode, gets 400 with the reason in "Error"; when
// `current` returns null (this replica does not lead, or has not synced)
// 503, which kube-scheduler treats as the extender failing (ignorable or
// not, docs/scheduling.md).
#pragma once

#include <functional>

#include "extender/extender.h"
#include "httpd/http_server.h"

namespace nodevol::provisioner {

inline constexpr char kJsonContentType[] = "application/json";
// kube-scheduler sends the whole Pod and, with nodeCacheCapable, the
// candidate nodes' names: the apiserver stores a Pod of at most 1.5 MiB,
// and 5,000 names of the longest 253 characters are 1.3 MB, so 4 MiB
// holds any real request. It bounds what the bodies in flight can make us
// hold (64 connections: 256 MiB at worst); the decoding keeps only what it
// reads (extender/args.h). Whole Node objects, without nodeCacheCapable,
// are refused anyway (400, or 413 past this size).
inline constexpr size_t kMaxExtenderBody = 4u << 20;

httpd::PostHandlers ExtenderHandlers(std::function<Extender*()> current);

}  // namespace nodevol::provisioner
