// libcannsimge.so: the C++ half of the CANN simulator, for clients that link the GE / platform / tiling C++
// libraries (MindSpore 2.10's Ascend plugin: real-clients.md §4.3, §5.2). Built with the old libstdc++ ABI
// (-D_GLIBCXX_USE_CXX11_ABI=0), like CANN. It holds:
//  - real objects where the clients' static initialisers need them (ge::StatusFactory);
//  - the securec formatting functions (variadic / va_list: not expressible in stable Rust);
//  - slog's C++ logging entry points (records are dropped, as with logging off);
//  - aclTensor's C++ accessors, forwarding to the nnopbase C getters of libcannsim.so;
//  - stubs for the other GE / fe / optiling names (stub_symbols.txt, generated into an assembly file by
//    scripts/sim-install.sh): they return 0 / NULL, which is what a GE without graph support gives. The GE
//    (aclop-IR / graph-compile) path is out of scope: an op that takes it fails in the client.
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>

namespace ge {
// Layout relied on by the inline ErrorNoRegisterar of GE's headers: the map is the first member.
class StatusFactory {
 public:
  static StatusFactory *Instance();
  std::map<uint32_t, std::string> err_desc_;
};
StatusFactory *StatusFactory::Instance() {
  static StatusFactory instance;
  return &instance;
}
}  // namespace ge

extern "C" {
// securec: write at most min(count, destMax-1) characters; -1 (and a truncated, terminated string) on truncation.
int vsnprintf_s(char *dest, size_t destMax, size_t count, const char *format, va_list ap) {
  if (dest == nullptr || format == nullptr || destMax == 0) return -1;
  size_t limit = destMax - 1;
  bool truncate_ok = count < limit;
  if (truncate_ok) limit = count;
  int n = vsnprintf(dest, limit + 1, format, ap);
  if (n < 0) {
    dest[0] = '\0';
    return -1;
  }
  if ((size_t)n > limit) {
    if (!truncate_ok) dest[0] = '\0';
    return -1;
  }
  return n;
}
int snprintf_s(char *dest, size_t destMax, size_t count, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int r = vsnprintf_s(dest, destMax, count, format, ap);
  va_end(ap);
  return r;
}

// nnopbase C getters (libcannsim.so)
int aclGetDataType(const void *tensor, int *dtype);
int aclGetFormat(const void *tensor, int *format);
int aclGetRawTensorAddr(const void *tensor, void **addr);
}

void DlogRecord(int, int, const char *, ...) {}
void DlogInner(int, int, const char *, ...) {}
int CheckLogLevel(int, int) { return 0; }

// Transactional-memory clones libstdc++ asks for: plain new[] / delete.
extern "C" void *_ZGTtnam(size_t n) { return ::operator new[](n); }
extern "C" void _ZGTtdlPv(void *p) { ::operator delete(p); }

class aclTensor {
 public:
  int GetDataType() const;
  int GetStorageFormat() const;
  void *GetStorageAddr() const;
  void *GetData() const;
};
int aclTensor::GetDataType() const {
  int v = -1;
  aclGetDataType(this, &v);
  return v;
}
int aclTensor::GetStorageFormat() const {
  int v = -1;
  aclGetFormat(this, &v);
  return v;
}
void *aclTensor::GetStorageAddr() const {
  void *p = nullptr;
  aclGetRawTensorAddr(this, &p);
  return p;
}
void *aclTensor::GetData() const { return GetStorageAddr(); }

// ---------------------------------------------------------------------------------------------------------------
// The GE operator model (graph/operator.h, operator_factory.h, tensor.h, types.h of CANN's metadef), as far as
// MindSpore 2.10's aclop path uses it. MindSpore compiles CANN's op_proto headers (REG_OP) into its own libraries:
// their inline constructors call the Operator::*Register methods below and their static OperatorCreatorRegister
// objects fill the factory, so the IR (input / output / attribute names, order, types, defaults) is the real one
// that MindSpore was built with. The classes' public layouts are those of the headers (one shared_ptr to an impl;
// Operator also has a vtable), because the clients' inline code (destructors, copies) touches the members.
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <vector>

namespace ge {
enum DataType : int { DT_FLOAT = 0, DT_UNDEFINED = 28 };
enum Format : int { FORMAT_NCHW = 0, FORMAT_ND = 2, FORMAT_RESERVED = 40 };
enum Placement : int { kPlacementHost = 0, kPlacementDevice = 1 };
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;

class AscendString {
 public:
  AscendString() = default;
  AscendString(const char *name);
  ~AscendString() = default;
  const char *GetString() const;
  bool operator<(const AscendString &d) const;

 private:
  std::shared_ptr<std::string> name_;
};
AscendString::AscendString(const char *name) {
  if (name != nullptr) name_ = std::make_shared<std::string>(name);
}
const char *AscendString::GetString() const { return name_ == nullptr ? "" : name_->c_str(); }
bool AscendString::operator<(const AscendString &d) const { return std::strcmp(GetString(), d.GetString()) < 0; }

struct ShapeImpl {
  std::vector<int64_t> dims;
};
class Shape {
 public:
  Shape();
  explicit Shape(const std::vector<int64_t> &dims);
  ~Shape() = default;
  size_t GetDimNum() const;
  int64_t GetDim(size_t idx) const;
  graphStatus SetDim(size_t idx, int64_t value);
  std::vector<int64_t> GetDims() const;
  int64_t GetShapeSize() const;

 private:
  std::shared_ptr<ShapeImpl> impl_;
};
Shape::Shape() : impl_(std::make_shared<ShapeImpl>()) {}
Shape::Shape(const std::vector<int64_t> &dims) : impl_(std::make_shared<ShapeImpl>(ShapeImpl{dims})) {}
size_t Shape::GetDimNum() const { return impl_ ? impl_->dims.size() : 0; }
int64_t Shape::GetDim(size_t idx) const { return (impl_ && idx < impl_->dims.size()) ? impl_->dims[idx] : 0; }
graphStatus Shape::SetDim(size_t idx, int64_t value) {
  if (!impl_ || idx >= impl_->dims.size()) return GRAPH_FAILED;
  impl_->dims[idx] = value;
  return GRAPH_SUCCESS;
}
std::vector<int64_t> Shape::GetDims() const { return impl_ ? impl_->dims : std::vector<int64_t>{}; }
// GE: the product of the dims; 0 for a scalar (no dims); -1 when a dim is unknown (negative).
int64_t Shape::GetShapeSize() const {
  if (!impl_ || impl_->dims.empty()) return 0;
  int64_t n = 1;
  for (int64_t d : impl_->dims) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

struct TensorDescImpl {
  std::vector<int64_t> shape, origin_shape;
  int format = FORMAT_ND, origin_format = FORMAT_ND, dtype = DT_FLOAT, placement = kPlacementDevice;
  int64_t real_dim_cnt = 0;
};
class TensorDesc {
 public:
  TensorDesc();
  explicit TensorDesc(Shape shape, Format format = FORMAT_ND, DataType dt = DT_FLOAT);
  TensorDesc(const TensorDesc &desc);
  TensorDesc(TensorDesc &&desc);
  ~TensorDesc() = default;
  TensorDesc &operator=(const TensorDesc &desc) = default;
  Shape GetShape() const;
  void SetShape(const Shape &shape);
  Shape GetOriginShape() const;
  void SetOriginShape(const Shape &shape);
  Format GetFormat() const;
  void SetFormat(Format f);
  void SetOriginFormat(Format f);
  DataType GetDataType() const;
  void SetDataType(DataType dt);
  void SetRealDimCnt(int64_t n);
  void SetPlacement(Placement p);
  Placement GetPlacement() const;

  std::shared_ptr<TensorDescImpl> impl;
};
TensorDesc::TensorDesc() : impl(std::make_shared<TensorDescImpl>()) {}
TensorDesc::TensorDesc(Shape shape, Format format, DataType dt) : impl(std::make_shared<TensorDescImpl>()) {
  impl->shape = impl->origin_shape = shape.GetDims();
  impl->format = impl->origin_format = format;
  impl->dtype = dt;
}
// Copies are deep (GE's TensorDesc copy constructor copies the impl).
TensorDesc::TensorDesc(const TensorDesc &d)
    : impl(std::make_shared<TensorDescImpl>(d.impl ? *d.impl : TensorDescImpl{})) {}
TensorDesc::TensorDesc(TensorDesc &&d) : impl(std::move(d.impl)) {}
Shape TensorDesc::GetShape() const { return Shape(impl->shape); }
void TensorDesc::SetShape(const Shape &s) { impl->shape = s.GetDims(); }
Shape TensorDesc::GetOriginShape() const { return Shape(impl->origin_shape); }
void TensorDesc::SetOriginShape(const Shape &s) { impl->origin_shape = s.GetDims(); }
Format TensorDesc::GetFormat() const { return (Format)impl->format; }
void TensorDesc::SetFormat(Format f) { impl->format = f; }
void TensorDesc::SetOriginFormat(Format f) { impl->origin_format = f; }
DataType TensorDesc::GetDataType() const { return (DataType)impl->dtype; }
void TensorDesc::SetDataType(DataType dt) { impl->dtype = dt; }
void TensorDesc::SetRealDimCnt(int64_t n) { impl->real_dim_cnt = n; }
void TensorDesc::SetPlacement(Placement p) { impl->placement = p; }
Placement TensorDesc::GetPlacement() const { return (Placement)impl->placement; }

struct TensorImpl {
  TensorDesc desc;
  std::vector<uint8_t> data;
};
class Tensor {
 public:
  Tensor();
  explicit Tensor(const TensorDesc &desc);
  Tensor(const TensorDesc &desc, const uint8_t *data, size_t size);
  ~Tensor() = default;
  TensorDesc GetTensorDesc() const;
  graphStatus SetTensorDesc(const TensorDesc &desc);
  uint8_t *GetData();
  size_t GetSize() const;
  graphStatus SetData(const uint8_t *data, size_t size);
  graphStatus SetData(uint8_t *data, size_t size, const std::function<void(uint8_t *)> &deleter);
  graphStatus SetData(const std::string &data);
  graphStatus SetData(const std::vector<std::string> &data);
  graphStatus ResetData();

  std::shared_ptr<TensorImpl> impl;
};
Tensor::Tensor() : impl(std::make_shared<TensorImpl>()) {}
Tensor::Tensor(const TensorDesc &desc) : impl(std::make_shared<TensorImpl>()) { impl->desc = TensorDesc(desc); }
Tensor::Tensor(const TensorDesc &desc, const uint8_t *data, size_t size) : Tensor(desc) { SetData(data, size); }
TensorDesc Tensor::GetTensorDesc() const { return TensorDesc(impl->desc); }
graphStatus Tensor::SetTensorDesc(const TensorDesc &desc) {
  impl->desc = TensorDesc(desc);
  return GRAPH_SUCCESS;
}
uint8_t *Tensor::GetData() { return impl->data.empty() ? nullptr : impl->data.data(); }
size_t Tensor::GetSize() const { return impl->data.size(); }
graphStatus Tensor::SetData(const uint8_t *data, size_t size) {
  if (data == nullptr && size != 0) return GRAPH_FAILED;
  impl->data.assign(data, data + size);
  return GRAPH_SUCCESS;
}
// The data is copied, then released with the caller's deleter (GE keeps it; copying is equivalent for readers).
graphStatus Tensor::SetData(uint8_t *data, size_t size, const std::function<void(uint8_t *)> &deleter) {
  graphStatus r = SetData(data, size);
  if (deleter && data != nullptr) deleter(data);
  return r;
}
graphStatus Tensor::SetData(const std::string &data) {
  impl->data.assign(data.begin(), data.end());
  impl->data.push_back(0);
  return GRAPH_SUCCESS;
}
graphStatus Tensor::SetData(const std::vector<std::string> &data) {
  impl->data.clear();
  for (const auto &s : data) {
    impl->data.insert(impl->data.end(), s.begin(), s.end());
    impl->data.push_back(0);
  }
  return GRAPH_SUCCESS;
}
graphStatus Tensor::ResetData() {
  impl->data.clear();
  return GRAPH_SUCCESS;
}

// Data-type constraints of the IR: kept only as opaque objects (the simulator checks dtypes in the kernels).
class TensorType {
 public:
  TensorType(const std::initializer_list<DataType> &types);
  std::shared_ptr<void> impl_;
};
TensorType::TensorType(const std::initializer_list<DataType> &) {}
class Promote {
 public:
  Promote(const std::initializer_list<const char *> &syms);
  std::shared_ptr<void> data_;
};
Promote::Promote(const std::initializer_list<const char *> &) {}

// An attribute value with the IR's type (GE's AttrValue kinds that REG_OP attributes use).
struct AttrV {
  enum Kind { kNone, kInt, kFloat, kBool, kStr, kDType, kTensor, kListInt, kListFloat, kListBool, kListStr,
              kListDType, kListListInt } kind = kNone;
  int64_t i = 0;
  float f = 0;
  bool b = false;
  std::string s;
  std::vector<int64_t> li;
  std::vector<float> lf;
  std::vector<bool> lb;
  std::vector<std::string> ls;
  std::vector<std::vector<int64_t>> lli;
  Tensor t;
  bool required = false;  // REQUIRED_ATTR with no value set yet
};

enum IoKind { kRequired, kOptional, kDynamic };
struct IrIo {
  std::string name;
  IoKind kind;
};

class OperatorImpl {
 public:
  std::string name, type;
  std::vector<IrIo> ir_inputs, ir_outputs;  // IR order
  std::vector<std::string> ir_attr_names;   // IR order
  std::map<std::string, AttrV> attrs;
  // Instance inputs / outputs (dynamic ones expanded to name0..nameN-1), in order, with their descriptors.
  std::vector<std::pair<std::string, TensorDesc>> inputs, outputs;
  std::function<graphStatus(class Operator &)> infer;

  int FindIn(const std::string &n) const {
    for (size_t i = 0; i < inputs.size(); i++)
      if (inputs[i].first == n) return (int)i;
    return -1;
  }
  int FindOut(const std::string &n) const {
    for (size_t i = 0; i < outputs.size(); i++)
      if (outputs[i].first == n) return (int)i;
    return -1;
  }
};

class Graph;
class Operator {
 public:
  Operator() {}
  explicit Operator(const std::string &type);
  explicit Operator(const char *type);
  Operator(const std::string &name, const std::string &type);
  Operator(const AscendString &name, const AscendString &type);
  Operator(const char *name, const char *type);
  virtual ~Operator() = default;

  std::string GetName() const;
  graphStatus GetName(AscendString &name) const;
  std::string GetOpType() const;
  graphStatus GetOpType(AscendString &type) const;
  TensorDesc GetOutputDesc(const std::string &name) const;
  TensorDesc GetOutputDesc(uint32_t index) const;
  int GetDynamicOutputNum(const std::string &name) const;
  graphStatus UpdateInputDesc(const std::string &name, const TensorDesc &d);
  graphStatus UpdateInputDesc(const char *name, const TensorDesc &d);
  graphStatus UpdateOutputDesc(const std::string &name, const TensorDesc &d);
  graphStatus UpdateOutputDesc(const char *name, const TensorDesc &d);
  graphStatus UpdateDynamicOutputDesc(const char *name, uint32_t index, const TensorDesc &d);
  Operator &SetInput(const std::string &dst, const Operator &src);
  Operator &SetInput(const std::string &dst, const Operator &src, const std::string &name);
  Operator &SetInput(const char *dst, const Operator &src);
  Operator &SetInput(const char *dst, uint32_t idx, const Operator &src);
  Operator &SetInput(const char *dst, uint32_t idx, const Operator &src, const char *name);
  Operator &AddControlInput(const Operator &src);

  Operator &SetAttr(const std::string &n, int64_t v);
  Operator &SetAttr(const std::string &n, int32_t v);
  Operator &SetAttr(const std::string &n, float v);
  Operator &SetAttr(const std::string &n, bool v);
  Operator &SetAttr(const std::string &n, const std::string &v);
  Operator &SetAttr(const std::string &n, const std::vector<int64_t> &v);
  Operator &SetAttr(const std::string &n, const std::vector<int32_t> &v);
  Operator &SetAttr(const std::string &n, const std::vector<float> &v);
  Operator &SetAttr(const std::string &n, const std::vector<bool> &v);
  Operator &SetAttr(const std::string &n, const std::vector<std::string> &v);
  Operator &SetAttr(const char *n, int64_t v);
  Operator &SetAttr(const char *n, int32_t v);
  Operator &SetAttr(const char *n, uint32_t v);
  Operator &SetAttr(const char *n, float v);
  Operator &SetAttr(const char *n, bool v);
  Operator &SetAttr(const char *n, const char *v);
  Operator &SetAttr(const char *n, const DataType &v);
  Operator &SetAttr(const char *n, const Tensor &v);
  Operator &SetAttr(const char *n, const std::vector<int64_t> &v);
  Operator &SetAttr(const char *n, const std::vector<int32_t> &v);
  Operator &SetAttr(const char *n, const std::vector<float> &v);
  Operator &SetAttr(const char *n, const std::vector<DataType> &v);
  Operator &SetAttr(const char *n, const std::vector<std::vector<int64_t>> &v);

  graphStatus GetAttr(const char *n, int64_t &v) const;
  graphStatus GetAttr(const char *n, int32_t &v) const;
  graphStatus GetAttr(const char *n, float &v) const;
  graphStatus GetAttr(const char *n, bool &v) const;
  graphStatus GetAttr(const char *n, DataType &v) const;
  graphStatus GetAttr(const char *n, Tensor &v) const;
  graphStatus GetAttr(const char *n, std::vector<int64_t> &v) const;
  graphStatus GetAttr(const char *n, std::vector<int32_t> &v) const;
  graphStatus GetAttr(const char *n, std::vector<float> &v) const;
  graphStatus GetAttr(const char *n, std::vector<DataType> &v) const;
  graphStatus GetAttr(const char *n, std::vector<std::vector<int64_t>> &v) const;
  graphStatus GetAttr(const std::string &n, std::string &v) const;
  graphStatus GetAttr(const std::string &n, std::vector<std::string> &v) const;

 protected:
  void AttrRegister(const char *n, float v);
  void AttrRegister(const char *n, int64_t v);
  void AttrRegister(const char *n, bool v);
  void AttrRegister(const char *n, const AscendString &v);
  void AttrRegister(const char *n, const DataType &v);
  void AttrRegister(const char *n, const Tensor &v);
  void AttrRegister(const char *n, const std::vector<float> &v);
  void AttrRegister(const char *n, const std::vector<int64_t> &v);
  void AttrRegister(const char *n, const std::vector<AscendString> &v);
  void AttrRegister(const char *n, const std::vector<DataType> &v);
  void AttrRegister(const char *n, const std::vector<std::vector<int64_t>> &v);
  void RequiredAttrRegister(const std::string &n);
  void RequiredAttrWithTypeRegister(const char *n, const char *type);
  void InputRegister(const std::string &n);
  void InputRegister(const char *n, const char *dtype_sym);
  void OptionalInputRegister(const std::string &n);
  void OptionalInputRegister(const char *n, const char *dtype_sym);
  void OutputRegister(const std::string &n);
  void OutputRegister(const char *n, const char *dtype_sym);
  void DynamicInputRegister(const char *n, uint32_t num, bool push_back);
  void DynamicInputRegister(const char *n, uint32_t num, const char *dtype_sym, bool push_back);
  void DynamicInputRegisterByIndex(const char *n, uint32_t num, size_t index);
  void DynamicOutputRegister(const char *n, uint32_t num, bool push_back);
  void DynamicOutputRegister(const char *n, uint32_t num, const char *dtype_sym, bool push_back);
  void DataTypeRegister(const char *sym, const TensorType &t);
  void DataTypeRegister(const char *sym, const Promote &p);
  void InferFuncRegister(const std::function<graphStatus(Operator &)> &f);
  void SubgraphCountRegister(const char *n, uint32_t count);
  void SetSubgraphBuilder(const char *n, uint32_t index, const std::function<Graph()> &b);

  std::shared_ptr<OperatorImpl> operator_impl_{nullptr};

 private:
  AttrV *Attr(const std::string &n, AttrV::Kind k);
  const AttrV *Find(const std::string &n, AttrV::Kind k) const;
  void Reg(const std::string &n, AttrV v);
};

Operator::Operator(const std::string &name, const std::string &type) : operator_impl_(std::make_shared<OperatorImpl>()) {
  operator_impl_->name = name;
  operator_impl_->type = type;
}
Operator::Operator(const std::string &type) : Operator(std::string(), type) {}
Operator::Operator(const char *type) : Operator(std::string(), std::string(type ? type : "")) {}
Operator::Operator(const AscendString &name, const AscendString &type)
    : Operator(std::string(name.GetString()), std::string(type.GetString())) {}
Operator::Operator(const char *name, const char *type)
    : Operator(std::string(name ? name : ""), std::string(type ? type : "")) {}

std::string Operator::GetName() const { return operator_impl_ ? operator_impl_->name : std::string(); }
graphStatus Operator::GetName(AscendString &name) const {
  name = AscendString(GetName().c_str());
  return GRAPH_SUCCESS;
}
std::string Operator::GetOpType() const { return operator_impl_ ? operator_impl_->type : std::string(); }
graphStatus Operator::GetOpType(AscendString &type) const {
  type = AscendString(GetOpType().c_str());
  return GRAPH_SUCCESS;
}
TensorDesc Operator::GetOutputDesc(const std::string &name) const {
  int i = operator_impl_ ? operator_impl_->FindOut(name) : -1;
  return i < 0 ? TensorDesc() : TensorDesc(operator_impl_->outputs[i].second);
}
TensorDesc Operator::GetOutputDesc(uint32_t index) const {
  if (!operator_impl_ || index >= operator_impl_->outputs.size()) return TensorDesc();
  return TensorDesc(operator_impl_->outputs[index].second);
}
int Operator::GetDynamicOutputNum(const std::string &name) const {
  if (!operator_impl_) return 0;
  int n = 0;
  while (operator_impl_->FindOut(name + std::to_string(n)) >= 0) n++;
  return n;
}
graphStatus Operator::UpdateInputDesc(const std::string &name, const TensorDesc &d) {
  int i = operator_impl_ ? operator_impl_->FindIn(name) : -1;
  if (i < 0) return GRAPH_FAILED;
  operator_impl_->inputs[i].second = TensorDesc(d);
  return GRAPH_SUCCESS;
}
graphStatus Operator::UpdateInputDesc(const char *name, const TensorDesc &d) { return UpdateInputDesc(std::string(name), d); }
graphStatus Operator::UpdateOutputDesc(const std::string &name, const TensorDesc &d) {
  int i = operator_impl_ ? operator_impl_->FindOut(name) : -1;
  if (i < 0) return GRAPH_FAILED;
  operator_impl_->outputs[i].second = TensorDesc(d);
  return GRAPH_SUCCESS;
}
graphStatus Operator::UpdateOutputDesc(const char *name, const TensorDesc &d) { return UpdateOutputDesc(std::string(name), d); }
graphStatus Operator::UpdateDynamicOutputDesc(const char *name, uint32_t index, const TensorDesc &d) {
  return UpdateOutputDesc(std::string(name) + std::to_string(index), d);
}
// Graph edges: the simulator runs no GE graphs (single-op aclop only), so connections are not recorded.
Operator &Operator::SetInput(const std::string &, const Operator &) { return *this; }
Operator &Operator::SetInput(const std::string &, const Operator &, const std::string &) { return *this; }
Operator &Operator::SetInput(const char *, const Operator &) { return *this; }
Operator &Operator::SetInput(const char *, uint32_t, const Operator &) { return *this; }
Operator &Operator::SetInput(const char *, uint32_t, const Operator &, const char *) { return *this; }
Operator &Operator::AddControlInput(const Operator &) { return *this; }

AttrV *Operator::Attr(const std::string &n, AttrV::Kind k) {
  if (!operator_impl_) return nullptr;
  AttrV &a = operator_impl_->attrs[n];
  a = AttrV();
  a.kind = k;
  return &a;
}
const AttrV *Operator::Find(const std::string &n, AttrV::Kind k) const {
  if (!operator_impl_) return nullptr;
  auto it = operator_impl_->attrs.find(n);
  if (it == operator_impl_->attrs.end() || it->second.required || it->second.kind != k) return nullptr;
  return &it->second;
}
#define SETA(T, K, F, EXPR)                                   \
  Operator &Operator::SetAttr(T n, V v) {                     \
    if (AttrV *a = Attr(n, AttrV::K)) a->F = EXPR;            \
    return *this;                                             \
  }
#define V int64_t
SETA(const std::string &, kInt, i, v)
SETA(const char *, kInt, i, v)
#undef V
#define V int32_t
SETA(const std::string &, kInt, i, v)
SETA(const char *, kInt, i, v)
#undef V
#define V uint32_t
SETA(const char *, kInt, i, v)
#undef V
#define V float
SETA(const std::string &, kFloat, f, v)
SETA(const char *, kFloat, f, v)
#undef V
#define V bool
SETA(const std::string &, kBool, b, v)
SETA(const char *, kBool, b, v)
#undef V
#define V const std::string &
SETA(const std::string &, kStr, s, v)
#undef V
#define V const char *
SETA(const char *, kStr, s, std::string(v ? v : ""))
#undef V
#define V const DataType &
SETA(const char *, kDType, i, (int64_t)v)
#undef V
#define V const Tensor &
SETA(const char *, kTensor, t, v)
#undef V
#define V const std::vector<int64_t> &
SETA(const std::string &, kListInt, li, v)
SETA(const char *, kListInt, li, v)
#undef V
#define V const std::vector<int32_t> &
SETA(const std::string &, kListInt, li, std::vector<int64_t>(v.begin(), v.end()))
SETA(const char *, kListInt, li, std::vector<int64_t>(v.begin(), v.end()))
#undef V
#define V const std::vector<float> &
SETA(const std::string &, kListFloat, lf, v)
SETA(const char *, kListFloat, lf, v)
#undef V
#define V const std::vector<bool> &
SETA(const std::string &, kListBool, lb, v)
#undef V
#define V const std::vector<std::string> &
SETA(const std::string &, kListStr, ls, v)
#undef V
#define V const std::vector<DataType> &
SETA(const char *, kListDType, li, std::vector<int64_t>(v.begin(), v.end()))
#undef V
#define V const std::vector<std::vector<int64_t>> &
SETA(const char *, kListListInt, lli, v)
#undef V
#undef SETA

#define GETA(T, R, K, EXPR)                                        \
  graphStatus Operator::GetAttr(T n, R v) const {                  \
    const AttrV *a = Find(n, AttrV::K);                            \
    if (a == nullptr) return GRAPH_FAILED;                         \
    v = EXPR;                                                      \
    return GRAPH_SUCCESS;                                          \
  }
GETA(const char *, int64_t &, kInt, a->i)
GETA(const char *, int32_t &, kInt, (int32_t)a->i)
GETA(const char *, float &, kFloat, a->f)
GETA(const char *, bool &, kBool, a->b)
GETA(const char *, DataType &, kDType, (DataType)a->i)
GETA(const char *, Tensor &, kTensor, a->t)
GETA(const char *, std::vector<int64_t> &, kListInt, a->li)
GETA(const char *, std::vector<int32_t> &, kListInt, std::vector<int32_t>(a->li.begin(), a->li.end()))
GETA(const char *, std::vector<float> &, kListFloat, a->lf)
GETA(const char *, std::vector<std::vector<int64_t>> &, kListListInt, a->lli)
GETA(const std::string &, std::string &, kStr, a->s)
GETA(const std::string &, std::vector<std::string> &, kListStr, a->ls)
#undef GETA
graphStatus Operator::GetAttr(const char *n, std::vector<DataType> &v) const {
  const AttrV *a = Find(n, AttrV::kListDType);
  if (a == nullptr) return GRAPH_FAILED;
  v.clear();
  for (int64_t x : a->li) v.push_back((DataType)x);
  return GRAPH_SUCCESS;
}

void Operator::Reg(const std::string &n, AttrV v) {
  if (!operator_impl_) return;
  operator_impl_->ir_attr_names.push_back(n);
  operator_impl_->attrs[n] = std::move(v);
}
#define REGA(T, K, F, EXPR)                       \
  void Operator::AttrRegister(const char *n, T v) { \
    AttrV a;                                      \
    a.kind = AttrV::K;                            \
    a.F = EXPR;                                   \
    Reg(n, std::move(a));                         \
  }
REGA(float, kFloat, f, v)
REGA(int64_t, kInt, i, v)
REGA(bool, kBool, b, v)
REGA(const AscendString &, kStr, s, v.GetString())
REGA(const DataType &, kDType, i, (int64_t)v)
REGA(const Tensor &, kTensor, t, v)
REGA(const std::vector<float> &, kListFloat, lf, v)
REGA(const std::vector<int64_t> &, kListInt, li, v)
REGA(const std::vector<DataType> &, kListDType, li, std::vector<int64_t>(v.begin(), v.end()))
REGA(const std::vector<std::vector<int64_t>> &, kListListInt, lli, v)
#undef REGA
void Operator::AttrRegister(const char *n, const std::vector<AscendString> &v) {
  AttrV a;
  a.kind = AttrV::kListStr;
  for (const auto &s : v) a.ls.push_back(s.GetString());
  Reg(n, std::move(a));
}
void Operator::RequiredAttrRegister(const std::string &n) {
  AttrV a;
  a.required = true;
  Reg(n, std::move(a));
}
void Operator::RequiredAttrWithTypeRegister(const char *n, const char *) { RequiredAttrRegister(n); }
void Operator::InputRegister(const std::string &n) {
  if (!operator_impl_) return;
  operator_impl_->ir_inputs.push_back({n, kRequired});
  operator_impl_->inputs.push_back({n, TensorDesc()});
}
void Operator::InputRegister(const char *n, const char *) { InputRegister(std::string(n)); }
void Operator::OptionalInputRegister(const std::string &n) {
  if (!operator_impl_) return;
  operator_impl_->ir_inputs.push_back({n, kOptional});
  operator_impl_->inputs.push_back({n, TensorDesc()});
}
void Operator::OptionalInputRegister(const char *n, const char *) { OptionalInputRegister(std::string(n)); }
void Operator::OutputRegister(const std::string &n) {
  if (!operator_impl_) return;
  operator_impl_->ir_outputs.push_back({n, kRequired});
  operator_impl_->outputs.push_back({n, TensorDesc()});
}
void Operator::OutputRegister(const char *n, const char *) { OutputRegister(std::string(n)); }
// A dynamic input/output declared in the IR (num 0) or instantiated with `num` tensors name0..name{num-1}.
void Operator::DynamicInputRegister(const char *n, uint32_t num, bool push_back) {
  if (!operator_impl_) return;
  bool known = false;
  for (auto &io : operator_impl_->ir_inputs) known |= io.name == n;
  if (!known) operator_impl_->ir_inputs.push_back({n, kDynamic});
  std::vector<std::pair<std::string, TensorDesc>> add;
  int base = 0;
  while (operator_impl_->FindIn(n + std::to_string(base)) >= 0) base++;
  for (uint32_t k = 0; k < num; k++) add.push_back({n + std::to_string(base + k), TensorDesc()});
  auto &in = operator_impl_->inputs;
  in.insert(push_back ? in.end() : in.begin(), add.begin(), add.end());
}
void Operator::DynamicInputRegister(const char *n, uint32_t num, const char *, bool push_back) {
  DynamicInputRegister(n, num, push_back);
}
void Operator::DynamicInputRegisterByIndex(const char *n, uint32_t num, size_t index) {
  if (!operator_impl_) return;
  std::vector<std::pair<std::string, TensorDesc>> add;
  for (uint32_t k = 0; k < num; k++) add.push_back({n + std::to_string(k), TensorDesc()});
  auto &in = operator_impl_->inputs;
  in.insert(in.begin() + std::min(index, in.size()), add.begin(), add.end());
}
void Operator::DynamicOutputRegister(const char *n, uint32_t num, bool push_back) {
  if (!operator_impl_) return;
  bool known = false;
  for (auto &io : operator_impl_->ir_outputs) known |= io.name == n;
  if (!known) operator_impl_->ir_outputs.push_back({n, kDynamic});
  std::vector<std::pair<std::string, TensorDesc>> add;
  int base = 0;
  while (operator_impl_->FindOut(n + std::to_string(base)) >= 0) base++;
  for (uint32_t k = 0; k < num; k++) add.push_back({n + std::to_string(base + k), TensorDesc()});
  auto &out = operator_impl_->outputs;
  out.insert(push_back ? out.end() : out.begin(), add.begin(), add.end());
}
void Operator::DynamicOutputRegister(const char *n, uint32_t num, const char *, bool push_back) {
  DynamicOutputRegister(n, num, push_back);
}
void Operator::DataTypeRegister(const char *, const TensorType &) {}
void Operator::DataTypeRegister(const char *, const Promote &) {}
void Operator::InferFuncRegister(const std::function<graphStatus(Operator &)> &f) {
  if (operator_impl_) operator_impl_->infer = f;
}
void Operator::SubgraphCountRegister(const char *, uint32_t) {}
void Operator::SetSubgraphBuilder(const char *, uint32_t, const std::function<Graph()> &) {}

// ---- OperatorFactory: creators registered by the op_proto static initialisers of the client's libraries.
using OpCreatorV2 = std::function<Operator(const AscendString &)>;
using OpCreator = std::function<Operator(const std::string &)>;
struct Creators {
  std::mutex mu;
  std::map<std::string, OpCreatorV2> v2;
  std::map<std::string, OpCreator> v1;
};
static Creators &creators() {
  static Creators *c = new Creators();  // never destroyed: registrations can outlive static destruction order
  return *c;
}
class OperatorCreatorRegister {
 public:
  OperatorCreatorRegister(const std::string &type, const OpCreator &f);
  OperatorCreatorRegister(const char *type, const OpCreatorV2 &f);
};
OperatorCreatorRegister::OperatorCreatorRegister(const std::string &type, const OpCreator &f) {
  std::lock_guard<std::mutex> g(creators().mu);
  creators().v1.emplace(type, f);
}
OperatorCreatorRegister::OperatorCreatorRegister(const char *type, const OpCreatorV2 &f) {
  if (type == nullptr) return;
  std::lock_guard<std::mutex> g(creators().mu);
  creators().v2.emplace(type, f);
}
class InferShapeFuncRegister {
 public:
  InferShapeFuncRegister(const std::string &type, const std::function<graphStatus(Operator &)> &f);
};
InferShapeFuncRegister::InferShapeFuncRegister(const std::string &, const std::function<graphStatus(Operator &)> &) {}

class OperatorFactory {
 public:
  static Operator CreateOperator(const std::string &name, const std::string &type);
  static Operator CreateOperator(const char *name, const char *type);
  static bool IsExistOp(const std::string &type);
  static bool IsExistOp(const char *type);
};
Operator OperatorFactory::CreateOperator(const char *name, const char *type) {
  if (name == nullptr || type == nullptr) return Operator();
  OpCreatorV2 f2;
  OpCreator f1;
  {
    std::lock_guard<std::mutex> g(creators().mu);
    auto it = creators().v2.find(type);
    if (it != creators().v2.end()) f2 = it->second;
    auto it1 = creators().v1.find(type);
    if (it1 != creators().v1.end()) f1 = it1->second;
  }
  if (f2) return f2(AscendString(name));
  if (f1) return f1(name);
  return Operator();
}
Operator OperatorFactory::CreateOperator(const std::string &name, const std::string &type) {
  return CreateOperator(name.c_str(), type.c_str());
}
bool OperatorFactory::IsExistOp(const char *type) {
  if (type == nullptr) return false;
  std::lock_guard<std::mutex> g(creators().mu);
  return creators().v2.count(type) != 0 || creators().v1.count(type) != 0;
}
bool OperatorFactory::IsExistOp(const std::string &type) { return IsExistOp(type.c_str()); }
}  // namespace ge

// Simulator-only introspection (tests / README): the number of operator types registered and, when `out` is
// non-NULL, their names separated by '\n' (truncated to `cap` bytes, NUL-terminated).
extern "C" size_t cannsimGeRegisteredOps(char *out, size_t cap) {
  auto &c = ge::creators();
  std::lock_guard<std::mutex> g(c.mu);
  std::string all;
  size_t n = 0;
  for (auto &kv : c.v2) {
    all += kv.first + "\n";
    n++;
  }
  for (auto &kv : c.v1)
    if (!c.v2.count(kv.first)) {
      all += kv.first + "\n";
      n++;
    }
  if (out != nullptr && cap > 0) {
    size_t k = std::min(cap - 1, all.size());
    std::memcpy(out, all.data(), k);
    out[k] = 0;
  }
  return n;
}
