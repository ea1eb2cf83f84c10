#include "model_io/torch_pickle.h"

#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/mapped_file.h"
#include "common/status.h"

namespace xlnet {
namespace {

// One unpickled value.
struct Value;
using ValuePtr = std::shared_ptr<Value>;
struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kTensor
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;                // kStr, kGlobal ("module.name")
  std::vector<ValuePtr> items;  // kTuple, kList
  std::vector<std::pair<ValuePtr, ValuePtr>> dict;  // kDict
  torch::Tensor tensor;  // kTensor (a storage is a 1-D tensor)
};

ValuePtr MakeValue(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

absl::StatusOr<torch::ScalarType> StorageDtype(const std::string& global) {
  static const auto* types = new std::map<std::string, torch::ScalarType>{
      {"torch.FloatStorage", torch::kFloat},
      {"torch.DoubleStorage", torch::kDouble},
      {"torch.HalfStorage", torch::kHalf},
      {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kLong},
      {"torch.IntStorage", torch::kInt},
      {"torch.ShortStorage", torch::kShort},
      {"torch.CharStorage", torch::kChar},
      {"torch.ByteStorage", torch::kByte},
      {"torch.BoolStorage", torch::kBool}};
  auto it = types->find(global);
  if (it == types->end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported storage type ", global));
  }
  return it->second;
}

class Unpickler {
 public:
  Unpickler(const std::string& data,
            caffe2::serialize::PyTorchStreamReader* archive)
      : data_(data), archive_(archive) {}
  // A pickle can put a list into itself (APPEND of a memoized or DUPed
  // list): shared_ptr cycles, leaked without this (found by
  // fuzz/pickle_fuzzer.cc). Every container still alive is emptied.
  ~Unpickler() {
    for (const std::weak_ptr<Value>& weak : containers_) {
      if (ValuePtr v = weak.lock()) {
        v->items.clear();
        v->dict.clear();
      }
    }
  }
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;

  absl::StatusOr<ValuePtr> Run() {
    while (true) {
      XLNET_ASSIGN_OR_RETURN(uint8_t op, Byte());
      if (op == '.') break;  // STOP
      XLNET_RETURN_IF_ERROR(Step(op));
    }
    if (stack_.size() != 1)
      return Error("stack has " + std::to_string(stack_.size()) +
                   " values at STOP");
    return stack_.back();
  }

 private:
  // A new value; containers are remembered for the destructor.
  ValuePtr Make(Value::Kind kind) {
    ValuePtr v = MakeValue(kind);
    if (kind == Value::Kind::kTuple || kind == Value::Kind::kList ||
        kind == Value::Kind::kDict) {
      containers_.push_back(v);
    }
    return v;
  }

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("pickle offset ", pos_, ": ", what));
  }
  absl::StatusOr<uint8_t> Byte() {
    if (pos_ >= data_.size()) return Error("truncated");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  absl::StatusOr<std::string> Bytes(size_t n) {
    if (n > data_.size() - pos_) return Error("truncated");
    std::string out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  absl::StatusOr<uint64_t> UInt(size_t n) {  // little-endian
    XLNET_ASSIGN_OR_RETURN(std::string b, Bytes(n));
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(b[k])) << (8 * k);
    return v;
  }
  absl::StatusOr<std::string> Line() {
    auto end = data_.find('\n', pos_);
    if (end == std::string::npos) return Error("unterminated line");
    std::string out = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  absl::StatusOr<ValuePtr> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return Error("stack underflow");
    }
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  absl::StatusOr<std::vector<ValuePtr>> PopMark() {
    if (marks_.empty()) return Error("no MARK");
    std::vector<ValuePtr> out(stack_.begin() + marks_.back(), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return out;
  }
  void Push(ValuePtr v) { stack_.push_back(std::move(v)); }
  void PushInt(int64_t i) {
    auto v = Make(Value::Kind::kInt);
    v->i = i;
    Push(v);
  }
  // A string whose length is a `len_bytes` little-endian prefix.
  absl::Status PushString(size_t len_bytes) {
    XLNET_ASSIGN_OR_RETURN(uint64_t n, UInt(len_bytes));
    XLNET_ASSIGN_OR_RETURN(std::string s, Bytes(n));
    PushStr(std::move(s));
    return absl::OkStatus();
  }
  void PushStr(std::string s) {
    auto v = Make(Value::Kind::kStr);
    v->s = std::move(s);
    Push(v);
  }
  void PushTuple(std::vector<ValuePtr> items) {
    auto v = Make(Value::Kind::kTuple);
    v->items = std::move(items);
    Push(v);
  }
  absl::Status SetItems(const std::vector<ValuePtr>& kv) {
    if (stack_.empty() || stack_.back()->kind != Value::Kind::kDict ||
        kv.size() % 2) {
      return Error("SETITEM(S) on a non-dict");
    }
    for (size_t k = 0; k < kv.size(); k += 2)
      stack_.back()->dict.emplace_back(kv[k], kv[k + 1]);
    return absl::OkStatus();
  }
  absl::Status Append(const std::vector<ValuePtr>& items) {
    if (stack_.empty() || stack_.back()->kind != Value::Kind::kList)
      return Error("APPEND on a non-list");
    for (const auto& it : items) stack_.back()->items.push_back(it);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int64_t>> Ints(const ValuePtr& v) {
    if (v->kind != Value::Kind::kTuple && v->kind != Value::Kind::kList)
      return Error("expected a tuple of ints");
    std::vector<int64_t> out;
    for (const auto& it : v->items) {
      if (it->kind != Value::Kind::kInt)
        return Error("expected a tuple of ints");
      out.push_back(it->i);
    }
    return out;
  }

  // BINPERSID ('storage', <torch.XStorage>, key, location, numel).
  absl::StatusOr<ValuePtr> LoadStorage(const ValuePtr& pid) {
    if (pid->kind != Value::Kind::kTuple || pid->items.size() < 5 ||
        pid->items[0]->kind != Value::Kind::kStr ||
        pid->items[0]->s != "storage" ||
        pid->items[1]->kind != Value::Kind::kGlobal ||
        pid->items[2]->kind != Value::Kind::kStr ||
        pid->items[4]->kind != Value::Kind::kInt) {
      return Error("unsupported persistent id");
    }
    const std::string& key = pid->items[2]->s;
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    XLNET_ASSIGN_OR_RETURN(torch::ScalarType dtype,
                           StorageDtype(pid->items[1]->s));
    const int64_t numel = pid->items[4]->i;
    const std::string record = "data/" + key;
    if (!archive_->hasRecord(record)) return Error("missing record " + record);
    auto [ptr, size] = archive_->getRecord(record);
    // numel is checked against the record first: numel * element size could
    // wrap around to the record's size.
    if (numel < 0 || static_cast<uint64_t>(numel) > size) {
      return Error(
          absl::StrCat(record, ": ", size, " bytes, for ", numel, " elements"));
    }
    const size_t want = static_cast<size_t>(numel) * c10::elementSize(dtype);
    if (size != want) {
      return Error(absl::StrCat(record, ": ", size, " bytes, expected ", want));
    }
    auto v = Make(Value::Kind::kTensor);
    v->tensor = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
    if (size) std::memcpy(v->tensor.data_ptr(), ptr.get(), size);
    storages_[key] = v;
    return v;
  }

  absl::StatusOr<ValuePtr> Reduce(const ValuePtr& callable,
                                  const ValuePtr& args) {
    if (callable->kind != Value::Kind::kGlobal)
      return Error("REDUCE of a non-global");
    const std::string& name = callable->s;
    const auto& a = args->items;
    if (name == "collections.OrderedDict" || name == "builtins.dict") {
      return Make(Value::Kind::kDict);
    }
    if (name == "torch._utils._rebuild_tensor_v2" ||
        name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4 || a[0]->kind != Value::Kind::kTensor ||
          a[1]->kind != Value::Kind::kInt) {
        return Error(name + ": unexpected arguments");
      }
      XLNET_ASSIGN_OR_RETURN(auto size, Ints(a[2]));
      XLNET_ASSIGN_OR_RETURN(auto stride, Ints(a[3]));
      if (size.size() != stride.size())
        return Error(name + ": size/stride rank differ");
      const int64_t storage_numel = a[0]->tensor.numel();
      int64_t last = a[1]->i;  // highest element touched
      bool empty = false;
      for (size_t d = 0; d < size.size(); ++d) {
        if (size[d] < 0 || stride[d] < 0)
          return Error(name + ": negative size or stride");
        if (size[d] == 0) empty = true;
        last += (size[d] - 1) * stride[d];
      }
      if (a[1]->i < 0 || (!empty && last >= storage_numel))
        return Error(name + ": view out of range");
      auto v = Make(Value::Kind::kTensor);
      v->tensor = a[0]->tensor.as_strided(size, stride, a[1]->i);
      return v;
    }
    if (name == "torch._utils._rebuild_parameter" && !a.empty() &&
        a[0]->kind == Value::Kind::kTensor) {
      return a[0];
    }
    if (name == "torch.jit._pickle.restore_type_tag" && !a.empty()) return a[0];
    return Error("unsupported global " + name);
  }

  absl::Status Step(uint8_t op) {
    switch (op) {
      case 0x80:
        return Byte().status();  // PROTO
      case 0x95:
        return Bytes(8).status();  // FRAME
      case '(':
        marks_.push_back(stack_.size());
        return absl::OkStatus();  // MARK
      case '}':
        Push(Make(Value::Kind::kDict));
        return absl::OkStatus();
      case ']':
        Push(Make(Value::Kind::kList));
        return absl::OkStatus();
      case ')':
        PushTuple({});
        return absl::OkStatus();
      case 'N':
        Push(Make(Value::Kind::kNone));
        return absl::OkStatus();
      case 0x88:
      case 0x89: {  // NEWTRUE/FALSE
        auto v = Make(Value::Kind::kBool);
        v->i = op == 0x88;
        Push(v);
        return absl::OkStatus();
      }
      case 'K':
      case 'M': {  // BININT1, BININT2
        XLNET_ASSIGN_OR_RETURN(uint64_t v, UInt(op == 'K' ? 1 : 2));
        PushInt(static_cast<int64_t>(v));
        return absl::OkStatus();
      }
      case 'J': {
        XLNET_ASSIGN_OR_RETURN(uint64_t v, UInt(4));
        PushInt(static_cast<int32_t>(static_cast<uint32_t>(v)));
        return absl::OkStatus();
      }
      case 0x8a: {  // LONG1
        XLNET_ASSIGN_OR_RETURN(uint64_t n, UInt(1));
        if (n > 8) return Error("LONG1 wider than 64 bits");
        XLNET_ASSIGN_OR_RETURN(uint64_t v, UInt(n));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1)
          v |= ~uint64_t{0} << (8 * n);  // sign
        PushInt(static_cast<int64_t>(v));
        return absl::OkStatus();
      }
      case 'G': {  // BINFLOAT (big-endian)
        XLNET_ASSIGN_OR_RETURN(std::string b, Bytes(8));
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k)
          bits = (bits << 8) | static_cast<uint8_t>(b[k]);
        auto v = Make(Value::Kind::kFloat);
        std::memcpy(&v->f, &bits, 8);
        Push(v);
        return absl::OkStatus();
      }
      case 'X':
        return PushString(4);  // BINUNICODE
      case 'T':
        return PushString(4);  // BINSTRING
      case 0x8c:
        return PushString(1);  // SHORT_BINUNICODE
      case 'U':
        return PushString(1);  // SHORT_BINSTRING
      case 'c': {              // GLOBAL
        XLNET_ASSIGN_OR_RETURN(std::string module, Line());
        XLNET_ASSIGN_OR_RETURN(std::string name, Line());
        auto v = Make(Value::Kind::kGlobal);
        v->s = module + "." + name;
        Push(v);
        return absl::OkStatus();
      }
      case 'q':
      case 'r':
      case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
        uint64_t idx = memo_.size();
        if (op != 0x94) {
          XLNET_ASSIGN_OR_RETURN(idx, UInt(op == 'q' ? 1 : 4));
        }
        if (stack_.empty()) return Error("PUT on an empty stack");
        memo_[idx] = stack_.back();
        return absl::OkStatus();
      }
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        XLNET_ASSIGN_OR_RETURN(uint64_t idx, UInt(op == 'h' ? 1 : 4));
        auto it = memo_.find(idx);
        if (it == memo_.end()) return Error("GET of an unknown memo entry");
        Push(it->second);
        return absl::OkStatus();
      }
      case 't': {  // TUPLE
        XLNET_ASSIGN_OR_RETURN(auto items, PopMark());
        PushTuple(items);
        return absl::OkStatus();
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<ValuePtr> items(op - 0x84);
        for (size_t k = items.size(); k-- > 0;) {
          XLNET_ASSIGN_OR_RETURN(items[k], Pop());
        }
        PushTuple(items);
        return absl::OkStatus();
      }
      case 'l': {  // LIST
        XLNET_ASSIGN_OR_RETURN(auto items, PopMark());
        auto v = Make(Value::Kind::kList);
        v->items = items;
        Push(v);
        return absl::OkStatus();
      }
      case 'd': {  // DICT
        XLNET_ASSIGN_OR_RETURN(auto kv, PopMark());
        Push(Make(Value::Kind::kDict));
        return SetItems(kv);
      }
      case 's': {
        XLNET_ASSIGN_OR_RETURN(auto value, Pop());
        XLNET_ASSIGN_OR_RETURN(auto key, Pop());
        return SetItems({key, value});
      }
      case 'u': {  // SETITEMS
        XLNET_ASSIGN_OR_RETURN(auto kv, PopMark());
        return SetItems(kv);
      }
      case 'a': {  // APPEND
        XLNET_ASSIGN_OR_RETURN(auto item, Pop());
        return Append({item});
      }
      case 'e': {  // APPENDS
        XLNET_ASSIGN_OR_RETURN(auto items, PopMark());
        return Append(items);
      }
      case 'R':
      case 0x81: {  // REDUCE, NEWOBJ
        XLNET_ASSIGN_OR_RETURN(auto args, Pop());
        XLNET_ASSIGN_OR_RETURN(auto callable, Pop());
        if (args->kind != Value::Kind::kTuple)
          return Error("REDUCE arguments are not a tuple");
        XLNET_ASSIGN_OR_RETURN(auto v, Reduce(callable, args));
        Push(v);
        return absl::OkStatus();
      }
      case 'Q': {  // BINPERSID
        XLNET_ASSIGN_OR_RETURN(auto pid, Pop());
        XLNET_ASSIGN_OR_RETURN(auto v, LoadStorage(pid));
        Push(v);
        return absl::OkStatus();
      }
      case 'b': {  // BUILD
        // State of an OrderedDict (its _metadata) or of a tensor: not needed.
        XLNET_RETURN_IF_ERROR(Pop().status());
        if (stack_.empty()) return Error("BUILD on an empty stack");
        return absl::OkStatus();
      }
      default:
        return Error(
            absl::StrCat("unsupported pickle opcode 0x", absl::Hex(op)));
    }
  }

  const std::string& data_;
  caffe2::serialize::PyTorchStreamReader* archive_;
  size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, ValuePtr> memo_;
  std::vector<std::weak_ptr<Value>> containers_;
  std::map<std::string, ValuePtr> storages_;
};

// Little-endian integers of a zip structure (callers check the bounds).
uint64_t ReadLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Bounds what reading the archive would decompress. torch.save stores its
// entries uncompressed; a deflated entry is inflated whole into memory at
// its declared size, so a 2.7 MB archive could ask for 4.3 GB. The entries'
// declared sizes, from the central directory (zip64 included), must add up
// to at most `kMaxExpansion` times the file's size. A file that is not a
// zip is left to PyTorchStreamReader's own error.
absl::Status CheckZipExpansion(const MappedFile& file) {
  constexpr uint64_t kMaxExpansion = 16;
  const uint8_t* bytes = file.bytes();
  const uint64_t size = file.size();
  constexpr uint64_t kEocd = 22;
  if (size < kEocd) return absl::OkStatus();
  // The end-of-central-directory record: within the last 64 KiB + 22 bytes.
  uint64_t eocd = size - kEocd;
  const uint64_t lowest = size > kEocd + 65535 ? size - kEocd - 65535 : 0;
  while (ReadLe(bytes + eocd, 4) != 0x06054b50) {
    if (eocd == lowest) return absl::OkStatus();
    --eocd;
  }
  uint64_t entries = ReadLe(bytes + eocd + 10, 2);
  uint64_t offset = ReadLe(bytes + eocd + 16, 4);
  // Zip64: the locator just before points at the zip64 record.
  if (eocd >= 20 && ReadLe(bytes + eocd - 20, 4) == 0x07064b50) {
    const uint64_t at = ReadLe(bytes + eocd - 20 + 8, 8);
    if (size < 56 || at > size - 56 || ReadLe(bytes + at, 4) != 0x06064b50) {
      return absl::InvalidArgumentError("corrupt zip64 directory record");
    }
    entries = ReadLe(bytes + at + 32, 8);
    offset = ReadLe(bytes + at + 48, 8);
  }
  uint64_t total = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    if (offset > size || size - offset < 46 ||
        ReadLe(bytes + offset, 4) != 0x02014b50) {
      return absl::InvalidArgumentError("corrupt zip central directory");
    }
    const uint8_t* h = bytes + offset;
    uint64_t uncompressed = ReadLe(h + 24, 4);
    const uint64_t name_len = ReadLe(h + 28, 2);
    const uint64_t extra_len = ReadLe(h + 30, 2);
    const uint64_t comment_len = ReadLe(h + 32, 2);
    if (size - offset - 46 < name_len + extra_len + comment_len) {
      return absl::InvalidArgumentError("corrupt zip central directory");
    }
    // A zip64 size: the first field of the extra block with id 1.
    for (uint64_t e = 0; uncompressed == 0xFFFFFFFF && e + 4 <= extra_len;) {
      const uint8_t* x = h + 46 + name_len + e;
      const uint64_t len = ReadLe(x + 2, 2);
      if (ReadLe(x, 2) == 1 && len >= 8 && e + 4 + len <= extra_len) {
        uncompressed = ReadLe(x + 4, 8);
      }
      e += 4 + len;
    }
    const std::string name(reinterpret_cast<const char*>(h + 46), name_len);
    if (uncompressed > kMaxExpansion * size - total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zip entry '", name, "' would expand the archive's ", size,
          " bytes past ", kMaxExpansion, " times (", uncompressed,
          " bytes declared; torch.save stores entries uncompressed)"));
    }
    total += uncompressed;
    offset += 46 + name_len + extra_len + comment_len;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NamedTensors> ReadTorchSaveStateDict(const std::string& path) {
  NamedTensors out;
  {
    XLNET_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
                           MappedFile::Open(path));
    const absl::Status bounded = CheckZipExpansion(*file);
    if (!bounded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", bounded.message()));
    }
  }
  absl::Status status = CatchExceptions(
      "not a readable torch.save zip archive", [&]() -> absl::Status {
        caffe2::serialize::PyTorchStreamReader archive(path);
        if (!archive.hasRecord("data.pkl")) {
          return absl::InvalidArgumentError(
              "no data.pkl (not a torch.save zip file)");
        }
        auto [ptr, size] = archive.getRecord("data.pkl");
        const std::string pickle(static_cast<const char*>(ptr.get()), size);
        Unpickler unpickler(pickle, &archive);
        XLNET_ASSIGN_OR_RETURN(ValuePtr root, unpickler.Run());
        if (root->kind != Value::Kind::kDict) {
          return absl::InvalidArgumentError(
              "top level is not a dict (a state_dict)");
        }
        for (const auto& [key, value] : root->dict) {
          if (key->kind != Value::Kind::kStr ||
              value->kind != Value::Kind::kTensor) {
            return absl::InvalidArgumentError(
                "state_dict entries must be str -> Tensor");
          }
          out.emplace_back(key->s, value->tensor);
        }
        return absl::OkStatus();
      });
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", status.message()));
  }
  return out;
}

}  // namespace xlnet
