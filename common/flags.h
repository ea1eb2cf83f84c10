// Command-line flags for the xlnet-* tools.
//
//   FlagParser flags("xlnet-inspect", "PATH [--config-style flags]");
//   flags.AddString("config", &config_path, "YAML config file");
//   flags.AddRepeated("set", &overrides, "override a config key:
//   section.key=value"); XLNET_RETURN_IF_ERROR(flags.Parse(argc, argv)); if
//   (flags.help_requested()) { std::cout << flags.Help(); return 0; }
//
// Accepts `--name value` and `--name=value`; booleans also as bare `--name`.
// Unknown flags are errors with a close-match suggestion.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xlnet {

class FlagParser {
 public:
  FlagParser(std::string program, std::string usage);

  void AddString(const std::string& name, std::string* value,
                 const std::string& help);
  void AddInt(const std::string& name, int64_t* value, const std::string& help);
  void AddDouble(const std::string& name, double* value,
                 const std::string& help);
  void AddBool(const std::string& name, bool* value, const std::string& help);
  // May be given many times; values are appended in order.
  void AddRepeated(const std::string& name, std::vector<std::string>* values,
                   const std::string& help);
  // Adds the standard pair: --config FILE and repeated --set k=v;
  // `config_help` replaces the generic help of --config.
  void AddConfigFlags(std::string* config_path,
                      std::vector<std::string>* overrides,
                      const std::string& config_help = "");

  // Parses argv[1..]. Non-flag arguments go to positional().
  absl::Status Parse(int argc, const char* const* argv);
  // What every tool does: Parse, then on --help print Help() to stdout and
  // return false (the tool exits 0); otherwise check that no positional
  // arguments were given (unless AllowPositional()) and that every
  // Require()d flag was set, and return true.
  absl::StatusOr<bool> ParseCommandLine(int argc, const char* const* argv);
  // Positional arguments are accepted (see positional()).
  void AllowPositional() { allow_positional_ = true; }
  // ParseCommandLine fails unless flag `name` is given.
  void Require(const std::string& name) { required_.push_back(name); }
  bool help_requested() const { return help_requested_; }
  const std::vector<std::string>& positional() const { return positional_; }
  // Whether flag `name` was given on the command line.
  bool WasSet(const std::string& name) const;
  // "usage: ..." plus one line per flag; Require()d flags' lines start
  // with "(required)".
  std::string Help() const;
  const std::string& program() const { return program_; }

 private:
  enum class Kind { kString, kInt, kDouble, kBool, kRepeated };
  struct Flag {
    std::string name;
    Kind kind;
    void* value;
    std::string help;
    std::string default_text;
    bool set = false;
  };
  Flag* FindFlag(const std::string& name);
  absl::Status Assign(Flag& flag, const std::string& text);

  std::string program_;
  std::string usage_;
  std::vector<Flag> flags_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
  bool allow_positional_ = false;
  std::vector<std::string> required_;
};

}  // namespace xlnet
