#include "common/flags.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace xlnet {

FlagParser::FlagParser(std::string program, std::string usage)
    : program_(std::move(program)), usage_(std::move(usage)) {}

void FlagParser::AddString(const std::string& name, std::string* value,
                           const std::string& help) {
  flags_.push_back({name, Kind::kString, value, help,
                    value->empty() ? "" : "\"" + *value + "\""});
}

void FlagParser::AddInt(const std::string& name, int64_t* value,
                        const std::string& help) {
  flags_.push_back({name, Kind::kInt, value, help, std::to_string(*value)});
}

void FlagParser::AddDouble(const std::string& name, double* value,
                           const std::string& help) {
  flags_.push_back({name, Kind::kDouble, value, help, absl::StrCat(*value)});
}

void FlagParser::AddBool(const std::string& name, bool* value,
                         const std::string& help) {
  flags_.push_back({name, Kind::kBool, value, help, *value ? "true" : "false"});
}

void FlagParser::AddRepeated(const std::string& name,
                             std::vector<std::string>* values,
                             const std::string& help) {
  flags_.push_back({name, Kind::kRepeated, values, help, ""});
}

void FlagParser::AddConfigFlags(std::string* config_path,
                                std::vector<std::string>* overrides,
                                const std::string& config_help) {
  AddString(
      "config", config_path,
      config_help.empty() ? "YAML config file (see configs/)" : config_help);
  AddRepeated("set", overrides,
              "override a config key, e.g. --set train.lr=3e-4 (repeatable)");
}

FlagParser::Flag* FlagParser::FindFlag(const std::string& name) {
  for (auto& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool FlagParser::WasSet(const std::string& name) const {
  for (const auto& f : flags_) {
    if (f.name == name) return f.set;
  }
  return false;
}

absl::Status FlagParser::Assign(Flag& flag, const std::string& text) {
  flag.set = true;
  switch (flag.kind) {
    case Kind::kString:
      *static_cast<std::string*>(flag.value) = text;
      return absl::OkStatus();
    case Kind::kInt: {
      int64_t v;
      if (!absl::SimpleAtoi(text, &v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag.name, ": expected an integer, got '", text, "'"));
      }
      *static_cast<int64_t*>(flag.value) = v;
      return absl::OkStatus();
    }
    case Kind::kDouble: {
      double v;
      if (!absl::SimpleAtod(text, &v) || !std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag.name, ": expected a number, got '", text, "'"));
      }
      *static_cast<double*>(flag.value) = v;
      return absl::OkStatus();
    }
    case Kind::kBool:
      if (text == "true" || text == "1") {
        *static_cast<bool*>(flag.value) = true;
      } else if (text == "false" || text == "0") {
        *static_cast<bool*>(flag.value) = false;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag.name, ": expected true or false, got '", text, "'"));
      }
      return absl::OkStatus();
    case Kind::kRepeated:
      static_cast<std::vector<std::string>*>(flag.value)->push_back(text);
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status FlagParser::Parse(int argc, const char* const* argv) {
  std::vector<std::string> names;
  for (const auto& f : flags_) names.push_back(f.name);
  names.push_back("help");
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional_.push_back(argv[i]);
      break;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      if (arg == "-h") {
        help_requested_ = true;
        continue;
      }
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    const auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (name == "help") {
      help_requested_ = true;
      continue;
    }
    Flag* flag = FindFlag(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, DidYouMean(name, names),
                       "; see ", program_, " --help"));
    }
    if (!value) {
      if (flag->kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value"));
      }
    }
    absl::Status status = Assign(*flag, *value);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> FlagParser::ParseCommandLine(int argc,
                                                  const char* const* argv) {
  absl::Status status = Parse(argc, argv);
  if (!status.ok()) return status;
  if (help_requested_) {
    std::cout << Help();
    return false;
  }
  if (!allow_positional_ && !positional_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument '",
                                                   positional_[0], "'; see ",
                                                   program_, " --help"));
  }
  for (const auto& name : required_) {
    if (!WasSet(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " is required; see ", program_, " --help"));
    }
  }
  return true;
}

std::string FlagParser::Help() const {
  std::ostringstream out;
  out << "usage: " << program_ << " " << usage_ << "\n\nflags:\n";
  // Names padded to the longest, the built-in --version included.
  size_t width = std::string("version").size() + 2;
  for (const auto& f : flags_) width = std::max(width, f.name.size() + 2);
  auto line = [&](const std::string& name, const std::string& help,
                  const std::string& def) {
    out << "  --" << name
        << std::string(std::max(width, name.size() + 1) - name.size(), ' ')
        << help;
    if (!def.empty()) out << " (default " << def << ")";
    out << "\n";
  };
  for (const auto& f : flags_) {
    const bool required = std::find(required_.begin(), required_.end(),
                                    f.name) != required_.end();
    line(f.name, required ? "(required) " + f.help : f.help, f.default_text);
  }
  line("help", "print this help and exit", "");
  // Handled by RunTool (common/tool_main.h) before any flag is parsed.
  line("version", "print the version and exit", "");
  return out.str();
}

}  // namespace xlnet
