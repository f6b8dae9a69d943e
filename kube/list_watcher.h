// ListWatcher: the two calls an Informer makes to the apiserver, behind a
// narrow interface so the informer's relist logic can be tested with a
// scripted fake. ClientListWatcher is the real one, over Client and Watch.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "kube/result.h"
#include "kube/watch_decoder.h"

namespace nodevol::kube {

class ListWatcher {
 public:
  using Handler = std::function<bool(const WatchEvent&)>;
  virtual ~ListWatcher() = default;

  using Item = std::function<void(nlohmann::json&& item)>;
  // Every object of the collection, each handed to `each` as it arrives,
  // and the list's resourceVersion. When the list starts over (an expired
  // continue token), `restart` is called first: forget what `each` got.
  // `resource_version` is "0" (any cached state) or "" (consistent read).
  virtual Result List(const std::string& resource_version, const Item& each, const std::function<void()>& restart,
                      std::string* list_resource_version) = 0;
  // One watch from `resource_version`, as Watch::Run; must return within
  // about a second once *cancel is true.
  virtual Result Watch(const std::string& resource_version, const Handler& handler,
                       const std::atomic<bool>* cancel) = 0;
};

class ClientListWatcher : public ListWatcher {
 public:
  // `path` is a collection ("/api/v1/persistentvolumeclaims"); either selector may be "".
  ClientListWatcher(Client* client, std::string path, std::string label_selector = "", std::string field_selector = "")
      : client_(client),
        path_(std::move(path)),
        label_selector_(std::move(label_selector)),
        field_selector_(std::move(field_selector)) {}

  Result List(const std::string& resource_version, const Item& each, const std::function<void()>& restart,
              std::string* list_resource_version) override;
  Result Watch(const std::string& resource_version, const Handler& handler,
               const std::atomic<bool>* cancel) override;

  const std::string& path() const { return path_; }

 private:
  Client* client_;
  std::string path_;
  std::string label_selector_;
  std::string field_selector_;
};

}  // namespace nodevol::kube
