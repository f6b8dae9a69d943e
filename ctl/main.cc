// nodevolctl: the operator's CLI for nodevold, over its unix socket.
//
// Exit status: 0 success, 1 the call to nodevold failed, 2 usage error.
#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "base/names.h"
#include "base/po_error.h"
#include "commands.h"
#include "printable.h"
#include "base/version.h"
#include "base/size.h"

namespace nodevol::ctl {
namespace {

constexpr int kExitRpc = 1;
constexpr int kExitUsage = 2;

po::options_description GlobalOptions() {
  po::options_description o("Global options (before or after COMMAND)");
  o.add_options()("socket", po::value<std::string>()->value_name("PATH"),
                  "nodevold's unix socket (default: $NODEVOL_SOCKET, else /run/nodevol/nodevold.sock)")(
      "address", po::value<std::string>()->value_name("HOST:PORT"),
      "a remote nodevold's --tls-listen address instead of the socket (mutual TLS; needs --tls-ca, --tls-cert, "
      "--tls-key; Publish, Unpublish and stats are refused there)")(
      "tls-ca", po::value<std::string>()->value_name("FILE"), "CA bundle that nodevold's certificate chains to")(
      "tls-cert", po::value<std::string>()->value_name("FILE"), "client certificate (must chain to nodevold's --tls-ca)")(
      "tls-key", po::value<std::string>()->value_name("FILE"), "private key of --tls-cert")(
      "tls-server-name", po::value<std::string>()->value_name("NAME"),
      "name nodevold's certificate must carry (default: the host of --address), e.g. the node name")(
      "output,o", po::value<std::string>()->value_name("table|json"), "output format (default: table)")(
      "timeout", po::value<std::string>()->value_name("SECONDS"), "deadline of each call (default: 30)");
  return o;
}

// Option values from the command's own options win over the ones before it.
Globals ResolveGlobals(const po::variables_map& top, const po::variables_map& command) {
  auto get = [&](const char* key) -> const std::string* {
    if (command.count(key)) return &command[key].as<std::string>();
    return top.count(key) ? &top[key].as<std::string>() : nullptr;
  };
  Globals g;
  if (const char* env = std::getenv("NODEVOL_SOCKET"); env != nullptr && *env != '\0') g.socket = env;
  if (const auto* socket = get("socket")) {
    if (socket->empty()) throw UsageError("--socket needs a path");
    g.socket = *socket;
  }
  if (const auto* address = get("address")) {
    if (address->empty() || address->find(':') == std::string::npos)
      throw UsageError("--address needs HOST:PORT, not '" + *address + "'");
    if (get("socket") != nullptr) throw UsageError("--address and --socket exclude each other");
    g.address = *address;
    std::string missing;
    for (auto [key, field] : {std::pair{"tls-ca", &g.tls_ca}, {"tls-cert", &g.tls_cert}, {"tls-key", &g.tls_key}}) {
      if (const auto* v = get(key); v != nullptr && !v->empty()) *field = *v;
      else missing += (missing.empty() ? "--" : ", --") + std::string(key);
    }
    if (!missing.empty()) throw UsageError("--address needs mutual TLS: missing " + missing);
    if (const auto* name = get("tls-server-name")) g.tls_server_name = *name;
    // The certificate is checked for this name; an address would be
    // checked against IP addresses, which a node chooses itself.
    std::string host = g.address.substr(0, g.address.rfind(':'));
    if (Status named = CheckNodeIdentityName(g.tls_server_name.empty() ? host : g.tls_server_name); !named.ok())
      throw UsageError(named.message());
  } else {
    for (const char* key : {"tls-ca", "tls-cert", "tls-key", "tls-server-name"})
      if (get(key) != nullptr) throw UsageError(std::string("--") + key + " only applies with --address");
  }
  if (const auto* output = get("output")) {
    if (*output != "table" && *output != "json") throw UsageError("invalid output format '" + *output + "': use -o table or -o json");
    g.json = *output == "json";
  }
  if (const auto* timeout = get("timeout")) {
    unsigned seconds = 0;
    auto [end, ec] = std::from_chars(timeout->data(), timeout->data() + timeout->size(), seconds);
    if (ec != std::errc() || end != timeout->data() + timeout->size() || seconds == 0 || timeout->empty()) {
      throw UsageError("invalid --timeout '" + *timeout + "': expected a whole number of seconds > 0");
    }
    g.timeout = std::chrono::seconds(seconds);
  }
  return g;
}

std::string Usage(const Command& c) {
  std::string usage = "nodevolctl " + c.name;
  for (const auto& arg : c.args) usage += " " + arg;
  return c.synopsis.empty() ? usage : usage + " " + c.synopsis;
}

void PrintTopHelp(const std::string& group = "") {
  std::cout << "Usage: nodevolctl [--socket PATH | --address HOST:PORT --tls-...] [-o table|json] [--timeout SECONDS] "
               "COMMAND ...\n\n"
               "Operates nodevold, the nodevol node daemon, over its unix socket (or a remote one over mutual TLS).\n\n"
               "Commands:\n";
  for (const auto& c : AllCommands()) {
    if (!group.empty() && c.name.rfind(group + " ", 0) != 0) continue;
    std::string summary = c.summary;
    for (size_t at = 0; (at = summary.find('\n', at)) != std::string::npos; at += 7) summary.replace(at, 1, "\n      ");
    std::cout << "  " << Usage(c).substr(11) << "\n      " << summary << "\n";
  }
  po::options_description options = GlobalOptions();
  options.add_options()("help,h", "show this help; COMMAND --help shows a command's")("version", "print the version");
  std::cout << '\n' << options << '\n'
            << "SIZE: " << kSizeForms << ".\n"
            << "Exit status: 0 success, 1 nodevold returned an error or is unreachable, 2 usage error.\n"
            << "Run `nodevolctl COMMAND --help` for the options of one command.\n";
}

// Makes the first word that is not an option (and everything after it)
// positional, so that options after COMMAND are left to the command.
std::vector<po::option> StopAtCommand(std::vector<std::string>& args) {
  std::vector<po::option> result;
  if (args.empty() || args[0].empty() || args[0][0] == '-') return result;
  for (const auto& arg : args) {
    po::option opt;
    opt.value.push_back(arg);
    opt.original_tokens.push_back(arg);
    opt.position_key = INT_MAX;
    result.push_back(std::move(opt));
  }
  args.clear();
  return result;
}

const Command* Find(const std::string& name) {
  const auto& all = AllCommands();
  auto it = std::find_if(all.begin(), all.end(), [&](const Command& c) { return c.name == name; });
  return it == all.end() ? nullptr : &*it;
}

bool IsGroup(const std::string& name) {
  const auto& all = AllCommands();
  return std::any_of(all.begin(), all.end(), [&](const Command& c) { return c.name.rfind(name + " ", 0) == 0; });
}

const char* CodeName(grpc::StatusCode code) {
  static constexpr std::array<const char*, 17> kNames{
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
      "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  auto index = static_cast<size_t>(code);
  return index < kNames.size() ? kNames[index] : "UNKNOWN";
}

int ReportRpcError(const grpc::Status& status, const Globals& g) {
  const std::string& message = status.error_message();
  std::cerr << "nodevolctl: " << CodeName(status.error_code()) << ": " << Printable(message) << '\n';
  std::error_code ec;
  bool socket_exists = std::filesystem::exists(g.socket, ec);
  bool connect_failed = !socket_exists || message.find("connect") != std::string::npos ||
                        message.find("Connection refused") != std::string::npos;
  std::string hint;
  if (!g.address.empty()) {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE)
      hint = "is nodevold listening on " + g.address + " (its --tls-listen)? A refused TLS handshake looks the same: " +
             "nodevold's certificate must chain to --tls-ca and name " +
             (g.tls_server_name.empty() ? "the host of --address" : "'" + g.tls_server_name + "'") +
             " (see --tls-server-name), and --tls-cert must chain to nodevold's --tls-ca and carry a name in "
             "its --tls-client-names";
    else if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED)
      hint = "this call is only served on nodevold's local unix socket; run nodevolctl on the node";
    if (!hint.empty()) {
      std::cerr << "hint: " << Printable(hint) << '\n';
      return kExitRpc;
    }
  }
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
      message.find("Permission denied") != std::string::npos) {
    hint = "run as root: the socket " + g.socket + " is only open to root";
  } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE && connect_failed) {
    hint = "is nodevold running? check `systemctl status nodevold` and the --socket path (" + g.socket +
           (socket_exists ? ")" : ", which does not exist)");
  } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    hint = "a backend of nodevold does not answer; try again later";
  } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && message != "Deadline Exceeded") {
    // nodevold's own: a tool it ran past that tool's deadline.
    hint = "a command nodevold ran did not finish in time: check the disk (kernel log) and `journalctl -u nodevold`, "
           "then retry";
  } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    hint = "nodevold did not answer within " + std::to_string(g.timeout.count()) +
           "s; raise --timeout or check `journalctl -u nodevold`";
  } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    hint = "see free space with `nodevolctl capacity`";
  } else if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    hint = "nodevold is older than nodevolctl; compare versions with `nodevolctl info`";
  }
  if (!hint.empty()) std::cerr << "hint: " << Printable(hint) << '\n';
  return kExitRpc;
}

int Main(int argc, char** argv) {
  std::string help = "nodevolctl --help";  // named in usage errors, narrowed once COMMAND is known
  Globals globals;
  try {
    po::options_description top = GlobalOptions();
    top.add_options()("help,h", "")("version", "")("command", po::value<std::string>())(
        "args", po::value<std::vector<std::string>>());
    po::positional_options_description top_positional;
    top_positional.add("command", 1).add("args", -1);
    po::variables_map top_vm;
    po::store(po::command_line_parser(argc, argv).options(top).positional(top_positional)
                  .extra_style_parser(StopAtCommand).run(), top_vm);
    if (top_vm.count("help")) {
      PrintTopHelp();
      return 0;
    }
    if (top_vm.count("version")) {
      std::cout << "nodevolctl " << nodevol::Version() << '\n';
      return 0;
    }
    if (!top_vm.count("command")) throw UsageError("no command given");

    std::string name = top_vm["command"].as<std::string>();
    auto args = top_vm.count("args") ? top_vm["args"].as<std::vector<std::string>>() : std::vector<std::string>();
    if (!Find(name) && IsGroup(name)) {
      help = "nodevolctl " + name + " --help";
      if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
        PrintTopHelp(name);
        return 0;
      }
      if (args.empty() || args[0].starts_with("-")) throw UsageError(name + " needs a subcommand");
      name += " " + args[0];
      args.erase(args.begin());
    }
    const Command* command = Find(name);
    if (command == nullptr) throw UsageError("unknown command '" + name + "'");
    help = "nodevolctl " + name + " --help";

    po::options_description own("Options");
    if (command->add_options != nullptr) command->add_options(own);
    own.add_options()("help,h", "show this help");
    po::options_description all;
    all.add(own).add(GlobalOptions()).add_options()("args", po::value<std::vector<std::string>>());
    po::positional_options_description positional;
    positional.add("args", -1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << "Usage: " << Usage(*command) << "\n\n" << command->summary << "\n\n" << own << '\n' << GlobalOptions();
      if (Usage(*command).find("SIZE") != std::string::npos) std::cout << "\nSIZE: " << kSizeForms << ".\n";
      return 0;
    }
    po::notify(vm);
    globals = ResolveGlobals(top_vm, vm);

    Invocation invocation{globals, vm, {}};
    if (vm.count("args")) invocation.args = vm["args"].as<std::vector<std::string>>();
    size_t required = std::count_if(command->args.begin(), command->args.end(),
                                    [](const std::string& a) { return !a.starts_with("["); });
    if (invocation.args.size() < required) throw UsageError("missing argument " + command->args[invocation.args.size()]);
    if (invocation.args.size() > command->args.size()) {
      throw UsageError("unexpected argument '" + invocation.args[command->args.size()] + "'");
    }
    return command->run(invocation);
  } catch (const po::error& e) {
    std::cerr << "nodevolctl: " << Printable(PoErrorText(e)) << "\nRun `" << help << "` for usage.\n";
    return kExitUsage;
  } catch (const UsageError& e) {
    std::cerr << "nodevolctl: " << Printable(e.what()) << "\nRun `" << help << "` for usage.\n";
    return kExitUsage;
  } catch (const RpcError& e) {
    return ReportRpcError(e.status, globals);
  }
}

}  // namespace
}  // namespace nodevol::ctl

int main(int argc, char** argv) {
  try {
    return nodevol::ctl::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "nodevolctl: " << nodevol::ctl::Printable(e.what()) << '\n';
    return 1;
  }
}
