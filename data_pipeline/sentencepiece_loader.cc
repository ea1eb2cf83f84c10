// Loads libxlnet_spm_bridge.so privately (see sentencepiece_bridge.h) and
// forwards BridgeProcessor and Train to it.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <iostream>
#include <mutex>

#include "data_pipeline/sentencepiece_bridge.h"

#ifndef XLNET_SPM_BRIDGE_PATH
#define XLNET_SPM_BRIDGE_PATH ""
#endif

namespace xlnet::data::spm {
namespace {

constexpr char kModuleName[] = "libxlnet_spm_bridge.so";

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// dlopen() with LOCAL + DEEPBIND: the module and its SentencePiece /
// protobuf-lite resolve their own symbols first and never enter the global
// scope. Sanitizer runtimes refuse RTLD_DEEPBIND in their dlopen
// interceptor (a deep-bound module would find libc's malloc before theirs).
// A sanitized build (XLNET_SANITIZE) builds the module with the same
// sanitizers, so the runtime is the first library of the module's own
// scope and its malloc is the one the module binds to; such a build calls
// libc's dlopen directly, past the interceptor.
void* OpenPrivately(const std::string& path) {
  constexpr int kFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#if defined(XLNET_SANITIZED_BRIDGE)
  using DlopenFn = void* (*)(const char*, int);
  static const DlopenFn real_dlopen = []() -> DlopenFn {
    for (const char* lib : {"libc.so.6", "libdl.so.2"}) {
      void* handle = ::dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
      if (handle == nullptr) continue;
      if (void* fn = ::dlsym(handle, "dlopen")) {
        return reinterpret_cast<DlopenFn>(fn);
      }
    }
    return nullptr;
  }();
  if (real_dlopen != nullptr) return real_dlopen(path.c_str(), kFlags);
#endif
  return ::dlopen(path.c_str(), kFlags);
}

struct Loaded {
  const BridgeApi* api = nullptr;
  std::string error;
};

Loaded LoadOnce() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("XLNET_SPM_BRIDGE"); env && *env) {
    candidates.push_back(env);
  }
  const std::string exe_dir = ExecutableDir();
  if (!exe_dir.empty()) {
    candidates.push_back(exe_dir + "/" + kModuleName);  // build/bin
    // An installed tree (cmake --install, the .deb): PREFIX/bin/xlnet-*,
    // PREFIX/lib/xlnet/libxlnet_spm_bridge.so.
    candidates.push_back(exe_dir + "/../lib/xlnet/" + kModuleName);
  }
  if (*XLNET_SPM_BRIDGE_PATH) candidates.push_back(XLNET_SPM_BRIDGE_PATH);
  Loaded result;
  std::string tried;
  for (const std::string& path : candidates) {
    if (::access(path.c_str(), R_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* handle = OpenPrivately(path);
    if (handle == nullptr) {
      result.error = path + ": " + ::dlerror();
      return result;
    }
    using ApiFn = const void* (*)();
    auto fn = reinterpret_cast<ApiFn>(::dlsym(handle, kBridgeApiSymbol));
    if (fn == nullptr) {
      result.error = path + ": no symbol " + kBridgeApiSymbol;
      return result;
    }
    const auto* api = static_cast<const BridgeApi*>(fn());
    if (api == nullptr || api->version != kBridgeApiVersion) {
      result.error = path + ": bridge API version mismatch (rebuild)";
      return result;
    }
    result.api = api;
    return result;
  }
  result.error = std::string("cannot find ") + kModuleName + " (tried " +
                 tried + "; set XLNET_SPM_BRIDGE to its path)";
  return result;
}

}  // namespace

const BridgeApi* LoadBridgeApi(std::string* error) {
  static const Loaded loaded = LoadOnce();
  if (loaded.api == nullptr && error != nullptr) *error = loaded.error;
  return loaded.api;
}

std::string Train(const BridgeTrainOptions& options, std::string* model_bytes) {
  std::string error;
  const BridgeApi* api = LoadBridgeApi(&error);
  if (api == nullptr) return error;
  BridgeTrainOptions with_cerr = options;
  with_cerr.process_cerr = &std::cerr;
  return api->train(with_cerr, model_bytes);
}

BridgeProcessor::BridgeProcessor() = default;

BridgeProcessor::~BridgeProcessor() {
  if (processor_ != nullptr) api_->destroy(processor_);
}

std::string BridgeProcessor::LoadFromBytes(const std::string& model_bytes) {
  if (api_ == nullptr) {
    std::string error;
    api_ = LoadBridgeApi(&error);
    if (api_ == nullptr) return error;
    processor_ = api_->create();
  }
  return api_->load(processor_, model_bytes);
}

std::string BridgeProcessor::Encode(const std::string& text,
                                    std::vector<BridgePiece>* pieces) const {
  return api_->encode(processor_, text, pieces);
}

std::string BridgeProcessor::EncodePieces(
    const std::string& text, std::vector<std::string>* pieces) const {
  return api_->encode_pieces(processor_, text, pieces);
}

int BridgeProcessor::Size() const { return api_->size(processor_); }

int BridgeProcessor::PieceToId(const std::string& piece) const {
  return api_->piece_to_id(processor_, piece);
}

const std::string& BridgeProcessor::IdToPiece(int id) const {
  return api_->id_to_piece(processor_, id);
}

bool BridgeProcessor::IsControl(int id) const {
  return api_->is_control(processor_, id);
}

int BridgeProcessor::UnkId() const { return api_->unk_id(processor_); }

}  // namespace xlnet::data::spm
