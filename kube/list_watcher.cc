#include "kube/list_watcher.h"

#include "kube/watch.h"

namespace nodevol::kube {

Result ClientListWatcher::List(const std::string& resource_version, const Item& each,
                               const std::function<void()>& restart, std::string* list_resource_version) {
  ListOptions options;
  options.label_selector = label_selector_;
  options.field_selector = field_selector_;
  options.resource_version = resource_version;
  return client_->ListEach(path_, options, each, restart, list_resource_version);
}

Result ClientListWatcher::Watch(const std::string& resource_version, const Handler& handler,
                                const std::atomic<bool>* cancel) {
  WatchOptions options;
  options.resource_version = resource_version;
  options.label_selector = label_selector_;
  options.field_selector = field_selector_;
  kube::Watch w(client_, path_, options, cancel);
  return w.Run(handler);
}

}  // namespace nodevol::kube
