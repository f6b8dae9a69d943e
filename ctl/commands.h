// nodevolctl commands: each parses its own options and makes one Node call.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <grpcpp/support/status.h>

namespace nodevol::ctl {

namespace po = boost::program_options;

inline constexpr const char* kDefaultSocket = "/run/nodevol/nodevold.sock";

// Options every command takes (before or after the command name).
struct Globals {
  std::string socket = kDefaultSocket;
  // A remote nodevold over mutual TLS instead of the socket (docs/tls.md):
  // host:port of its --tls-listen, the CA its certificate chains to, our
  // client certificate and key, and the name its certificate must carry
  // (default: the host part of address).
  std::string address;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  bool json = false;
  std::chrono::seconds timeout{30};
};

// Wrong command line: exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A failed call to nodevold: exit status 1.
struct RpcError : std::runtime_error {
  explicit RpcError(grpc::Status s) : std::runtime_error(s.error_message()), status(std::move(s)) {}
  grpc::Status status;
};

struct Invocation {
  const Globals& globals;
  const po::variables_map& options;
  std::vector<std::string> args;  // positional arguments, checked against Command::args
};

struct Command {
  std::string name;                            // "info", "volume create"
  std::vector<std::string> args;               // positional names; "[POOL]" is optional
  std::string synopsis;                        // the options part of the usage line
  std::string summary;                         // one line for the command list
  void (*add_options)(po::options_description&);  // may be null
  int (*run)(const Invocation&);
};

const std::vector<Command>& AllCommands();

}  // namespace nodevol::ctl
