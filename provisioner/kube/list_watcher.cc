#include "kube/list_watcher.h"

#include "kube/watch.h"

namespace nodevol::kube {

Result ClientListWatcher::List(const std::string& resource_version, std::vector<nlohmann::json>* items,
                               std::string* list_resource_version) {
  ListOptions options;
  options.label_selector = label_selector_;
  options.resource_version = resource_version;
  nlohmann::json list;
  Result r = client_->List(path_, options, &list);
  if (!r.ok()) return r;
  items->clear();
  for (auto& item : list["items"]) items->push_back(std::move(item));
  *list_resource_version = list.value("/metadata/resourceVersion"_json_pointer, std::string());
  return r;
}

Result ClientListWatcher::Watch(const std::string& resource_version, const Handler& handler,
                                const std::atomic<bool>* cancel) {
  WatchOptions options;
  options.resource_version = resource_version;
  options.label_selector = label_selector_;
  kube::Watch w(client_, path_, options, cancel);
  return w.Run(handler);
}

}  // namespace nodevol::kube
