#include "util/web_config.h"

#include <fmt/format.h>

#include "util/config_toml.h"
#include "util/did_you_mean.h"
#include "util/listen_address.h"

namespace gpulane {
namespace {

Error Bad(const std::string& path, const toml::node& node, const std::string& what) { return ConfigBad(path, node.source(), what); }

// A list of strings each passing `ok`; the first that does not is the error `what`.
Status LoadList(const std::string& path, const toml::node& node, bool (*ok)(const std::string&), const std::string& what,
                std::vector<std::string>& out) {
  auto list = node.as_array();
  if (!list) return Bad(path, node, what);
  std::vector<std::string> loaded;
  for (auto&& item : *list) {
    auto text = item.value<std::string>();
    if (!text || !item.is_string() || !ok(*text)) return Bad(path, item, what);
    loaded.push_back(*text);
  }
  out = std::move(loaded);
  return Status::Ok();
}

}  // namespace

bool IsAllowedHostName(const std::string& name) {
  if (name.empty() || name.size() > 255) return false;
  for (unsigned char c : name)
    if (c <= ' ' || c == '/' || c == '@' || c == '"' || c == '\'' || c == '<' || c == '>' || c == '\\' || c == 0x7f) return false;
  return true;
}

bool IsPeerUrl(const std::string& url) {
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) return false;
  if (url.size() > 512) return false;
  for (unsigned char c : url)
    if (c <= ' ' || c == '"' || c == '\'' || c == '<' || c == '>' || c == '\\' || c == ';' || c == ',' || c == 0x7f) return false;
  return true;
}

std::string WebListenFor(const Config& config, const std::string& machine_listen, bool system_daemon) {
  if (system_daemon || config.web_listen != machine_listen || config.web_listen == "off") return config.web_listen;
  return "127.0.0.1:0";
}

Status LoadWebTable(const std::string& path, const toml::table& web, Config& config) {
  for (auto&& [key, node] : web) {
    if (key == "listen") {
      auto text = node.value<std::string>();
      if (!text) return Bad(path, node, fmt::format("web.listen must be a string: \"HOST:PORT\" (default \"{}\") or \"off\"", kDefaultWebListen));
      if (*text != "off")
        if (auto parsed = ParseListen(*text); !parsed) return Bad(path, node, "web.listen: " + parsed.error().message + ", or \"off\"");
      config.web_listen = *text;
    } else if (key == "show_commands") {
      auto flag = node.value<bool>();
      if (!flag || !node.is_boolean()) return Bad(path, node, "web.show_commands must be true or false");
      config.web_show_commands = *flag;
    } else if (key == "allowed_hosts") {
      if (Status s = LoadList(path, node, IsAllowedHostName, "web.allowed_hosts must be a list of host names people type, like "
                              "[\"gpu01\", \"gpu01.example.org\"] (no port or scheme)", config.web_allowed_hosts); !s.ok())
        return s;
    } else if (key == "peers") {
      if (Status s = LoadList(path, node, IsPeerUrl, "web.peers must be a list of other gpulane servers' URLs, like "
                              "[\"http://gpu02:9470/\"]", config.web_peers); !s.ok())
        return s;
    } else {
      return Bad(path, node, UnknownKeyMessage("web", key.str(), {"listen", "show_commands", "allowed_hosts", "peers"}));
    }
  }
  return Status::Ok();
}

}  // namespace gpulane
