// The operator IR definitions of the op types classic MindSpore 2.10 nets send down the aclop path: what CANN's
// op_proto library (opp/built-in/op_proto, loaded by GE) registers into ge::OperatorFactory. Each line gives the
// op type, its inputs and outputs in IR order and its attributes in IR order with type and default, as CANN's
// REG_OP declarations (nn_calculation_ops.h, elewise_calculation_ops.h, nn_norm_ops.h, reduce_ops.h, ...) define
// them. Syntax: "Type: in1, ?optional_in, *dynamic_in -> out1, out2 | attr:Type=default; attr:Type!" where
// `!` marks a REQUIRED_ATTR and list defaults are space separated. The simulator's aclop kernels
// (simulator/src/aclop.rs) implement these types.
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace ge {
enum DataType : int;
class AscendString {
 public:
  AscendString() = default;
  AscendString(const char *name);
  const char *GetString() const;

 private:
  std::shared_ptr<std::string> name_;
};
class Tensor;
class Graph;
class TensorType;
class Promote;
class OperatorImpl;
class Operator {
 public:
  Operator() {}
  Operator(const char *name, const char *type);
  virtual ~Operator() = default;

 protected:
  void AttrRegister(const char *n, float v);
  void AttrRegister(const char *n, int64_t v);
  void AttrRegister(const char *n, bool v);
  void AttrRegister(const char *n, const AscendString &v);
  void AttrRegister(const char *n, const std::vector<float> &v);
  void AttrRegister(const char *n, const std::vector<int64_t> &v);
  void AttrRegister(const char *n, const std::vector<AscendString> &v);
  void RequiredAttrWithTypeRegister(const char *n, const char *type);
  void InputRegister(const char *n, const char *dtype_sym);
  void OptionalInputRegister(const char *n, const char *dtype_sym);
  void OutputRegister(const char *n, const char *dtype_sym);
  void DynamicInputRegister(const char *n, uint32_t num, const char *dtype_sym, bool push_back);
  void DynamicOutputRegister(const char *n, uint32_t num, const char *dtype_sym, bool push_back);
  std::shared_ptr<OperatorImpl> operator_impl_{nullptr};
};
class OperatorCreatorRegister {
 public:
  OperatorCreatorRegister(const char *type, const std::function<Operator(const AscendString &)> &f);
};
}  // namespace ge

namespace {
const char *const kIr[] = {
    // nn_calculation_ops.h
    "BiasAdd: x, bias -> y | data_format:String=NHWC",
    "BNTrainingReduce: x -> sum, square_sum",
    "BNTrainingReduceGrad: grads, x, diff_scale, diff_offset, scale, batch_mean, batch_variance -> y | "
    "epsilon:Float=0.0001",
    "BNTrainingUpdate: x, sum, square_sum, scale, offset, mean, variance -> y, mean, variance, batch_mean, "
    "batch_variance | factor:Float!; epsilon:Float!",
    "BNTrainingUpdateGrad: grads, x, batch_mean, batch_variance -> diff_scale, diff_offset | epsilon:Float=0.0001",
    "BNInfer: x, scale, offset, mean, variance -> y | epsilon:Float!",
    "MaxPoolWithArgmax: x -> y, argmax | ksize:ListInt!; strides:ListInt!; padding:String!; Targmax:Int=7",
    "MaxPoolGradWithArgmax: x, grad, argmax -> y | ksize:ListInt!; strides:ListInt!; padding:String!",
    "Relu: x -> y",
    "SoftmaxV2: x -> y | axes:ListInt=-1; half_to_float:Bool=false",
    "Add: x1, x2 -> y",
    "AddV2: x1, x2 -> y",
    "Sub: x1, x2 -> y",
    "Mul: x1, x2 -> y",
    "Div: x1, x2 -> y",
    "Cast: x -> y | dst_type:Int!",
    "MatMul: x1, x2, ?bias -> y | transpose_x1:Bool=false; transpose_x2:Bool=false",
    "MatMulV2: x1, x2, ?bias, ?offset_w -> y | transpose_x1:Bool=false; transpose_x2:Bool=false; offset_x:Int=0",
    "BatchMatMul: x1, x2, ?bias -> y | adj_x1:Bool=false; adj_x2:Bool=false",
    "BatchMatMulV2: x1, x2, ?bias, ?offset_w -> y | adj_x1:Bool=false; adj_x2:Bool=false; offset_x:Int=0",
    "ReduceSum: x, axes -> y | keep_dims:Bool=false",
    "ReduceSumD: x -> y | axes:ListInt!; keep_dims:Bool=false",
    "Identity: x -> y",
    "Fill: dims, value -> y",
    "Range: start, limit, delta -> y",
    "PadV3: x, paddings, ?constant_values -> y | mode:String=constant; paddings_contiguous:Bool=true",
    "Conv2D: x, filter, ?bias, ?offset_w -> y | strides:ListInt!; pads:ListInt!; dilations:ListInt=1 1 1 1; "
    "groups:Int=1; data_format:String=NHWC; offset_x:Int=0",
    "Conv2DBackpropInput: input_size, filter, out_backprop -> y | strides:ListInt!; pads:ListInt!; "
    "dilations:ListInt=1 1 1 1; groups:Int=1; data_format:String=NHWC",
    "Conv2DBackpropFilter: x, filter_size, out_backprop -> y | strides:ListInt!; pads:ListInt!; "
    "dilations:ListInt=1 1 1 1; groups:Int=1; data_format:String=NHWC",
    "BiasAddGrad: x -> y | data_format:String=NHWC",
    // nn_pooling_ops.h
    "MaxPool: x -> y | ksize:ListInt!; strides:ListInt!; padding:String!; data_format:String=NHWC",
    "MaxPoolGrad: x1, x2, grad -> y | ksize:ListInt!; strides:ListInt!; padding:String!; data_format:String=NHWC",
    "AvgPool: x -> y | ksize:ListInt!; strides:ListInt!; padding:String!; data_format:String=NHWC",
    "AvgPoolGrad: orig_input_shape, input_grad -> out_grad | ksize:ListInt!; strides:ListInt!; padding:String!; "
    "data_format:String=NHWC",
    // nn_norm_ops.h
    "LayerNorm: x, gamma, beta -> y, mean, variance | begin_norm_axis:Int=0; begin_params_axis:Int=0; "
    "epsilon:Float=0.0000001",
    "LayerNormGrad: dy, x, variance, mean, gamma -> pd_x, pd_gamma, pd_beta",
    "SoftmaxCrossEntropyWithLogits: features, labels -> loss, backprop",
    "SparseSoftmaxCrossEntropyWithLogits: features, labels -> loss, backprop",
    "SoftmaxGrad: softmax, grad_softmax -> grad_x | axes:ListInt=-1",
    "LogSoftmaxV2: logits -> logsoftmax | axes:ListInt=-1",
    "LogSoftmaxGrad: grad, x -> y | axis:ListInt=-1",
    "BatchNorm: x, scale, offset, ?mean, ?variance -> y, batch_mean, batch_variance, reserve_space_1, "
    "reserve_space_2, reserve_space_3 | epsilon:Float=0.0001; data_format:String=NHWC; is_training:Bool=true",
    "BatchNormGrad: y_backprop, x, scale, reserve_space_1, reserve_space_2, ?reserve_space_3 -> x_backprop, "
    "scale_backprop, offset_backprop, reserve_space_4, reserve_space_5 | epsilon:Float=0.0001; "
    "data_format:String=NHWC; is_training:Bool=true",
    "DropOutGenMask: shape, prob -> y | seed:Int=0; seed2:Int=0",
    "DropOutDoMask: x, mask, keep_prob -> y",
    // nonlinear_fuc_ops.h
    "Gelu: x -> y",
    "GeluGrad: dy, x, y -> z",
    "Sigmoid: x -> y",
    "SigmoidGrad: y, dy -> z",
    "Tanh: x -> y",
    "TanhGrad: y, dy -> z",
    "ReluGrad: gradients, features -> backprops",
    // elewise_calculation_ops.h
    "AddN: *x -> y | N:Int!",
    "RealDiv: x1, x2 -> y",
    "Maximum: x1, x2 -> y",
    "Minimum: x1, x2 -> y",
    "Square: x -> y",
    "Sqrt: x -> y",
    "Neg: x -> y",
    "Exp: x -> y",
    "Log: x -> y",
    // state_ops.h
    "Assign: ref, value -> ref | validate_shape:Bool=true; use_locking:Bool=false",
    "AssignAdd: ref, value -> ref | use_locking:Bool=false",
    "AssignSub: var, value -> var | use_locking:Bool=false",
    // reduce_ops.h
    "ReduceMean: x, axes -> y | keep_dims:Bool=false; noop_with_empty_axes:Bool=true",
    "ReduceMeanD: x -> y | axes:ListInt!; keep_dims:Bool=false; noop_with_empty_axes:Bool=false",
    "ReduceMax: x, axes -> y | keep_dims:Bool=false",
    // array_ops.h / selection_ops.h / transformation_ops.h
    "OneHot: x, depth, on_value, off_value -> y | axis:Int=-1",
    "OneHotD: x, on_value, off_value -> y | depth:Int!; axis:Int=-1",
    "Tile: x, multiples -> y",
    "TileD: x -> y | multiples:ListInt!",
    "Transpose: x, perm -> y",
    "TransposeD: x -> y | perm:ListInt!",
    "Reshape: x, shape -> y | axis:Int=0; num_axes:Int=-1",
    "ExpandDims: x, axis -> y",
    "Squeeze: x -> y | axis:ListInt=",
    "Unsqueeze: x -> y | axes:ListInt=",
    "Flatten: x -> y | axis:Int=1",
    // nn_training_ops.h
    "ApplyMomentum: var, accum, lr, grad, momentum -> var | use_nesterov:Bool=false; use_locking:Bool=false",
    "ApplyMomentumD: var, accum, lr, grad, momentum -> var, accum | use_nesterov:Bool=false; "
    "use_locking:Bool=false",
    "ApplyAdam: var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad -> var | "
    "use_locking:Bool=false; use_nesterov:Bool=false",
    "ApplyAdamD: var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad -> var, m, v | "
    "use_locking:Bool=false; use_nesterov:Bool=false",
    "ApplyAdamWithAmsgrad: var, m, v, vhat, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad -> var | "
    "use_locking:Bool=false",
};

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}
std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, sep))
    if (!trim(x).empty()) v.push_back(trim(x));
  return v;
}

struct Ir {
  std::string type;
  std::vector<std::string> ins, outs;
  std::vector<std::pair<std::string, std::string>> attrs;  // name, "Type=default" or "Type!"
};

class IrOperator : public ge::Operator {
 public:
  IrOperator(const ge::AscendString &name, const Ir &ir) : ge::Operator(name.GetString(), ir.type.c_str()) {
    for (const auto &i : ir.ins) {
      if (i[0] == '?')
        OptionalInputRegister(i.c_str() + 1, "T");
      else if (i[0] == '*')
        DynamicInputRegister(i.c_str() + 1, 0, "T", true);
      else
        InputRegister(i.c_str(), "T");
    }
    for (const auto &o : ir.outs) {
      if (o[0] == '*')
        DynamicOutputRegister(o.c_str() + 1, 0, "T", true);
      else
        OutputRegister(o.c_str(), "T");
    }
    for (const auto &a : ir.attrs) {
      const std::string &spec = a.second;
      const char *n = a.first.c_str();
      if (spec.back() == '!') {
        RequiredAttrWithTypeRegister(n, spec.substr(0, spec.size() - 1).c_str());
        continue;
      }
      size_t eq = spec.find('=');
      std::string ty = spec.substr(0, eq), dv = spec.substr(eq + 1);
      if (ty == "Int") {
        AttrRegister(n, (int64_t)std::strtoll(dv.c_str(), nullptr, 10));
      } else if (ty == "Float") {
        AttrRegister(n, std::strtof(dv.c_str(), nullptr));
      } else if (ty == "Bool") {
        AttrRegister(n, dv == "true");
      } else if (ty == "String") {
        AttrRegister(n, ge::AscendString(dv.c_str()));
      } else if (ty == "ListInt") {
        std::vector<int64_t> v;
        for (const auto &x : split(dv, ' ')) v.push_back(std::strtoll(x.c_str(), nullptr, 10));
        AttrRegister(n, v);
      } else if (ty == "ListFloat") {
        std::vector<float> v;
        for (const auto &x : split(dv, ' ')) v.push_back(std::strtof(x.c_str(), nullptr));
        AttrRegister(n, v);
      }
    }
  }
};

Ir parse(const char *line) {
  Ir ir;
  std::string s(line);
  size_t colon = s.find(':'), arrow = s.find("->"), bar = s.find('|');
  ir.type = trim(s.substr(0, colon));
  ir.ins = split(s.substr(colon + 1, arrow - colon - 1), ',');
  ir.outs = split(s.substr(arrow + 2, (bar == std::string::npos ? s.size() : bar) - arrow - 2), ',');
  if (bar != std::string::npos) {
    for (const auto &a : split(s.substr(bar + 1), ';')) {
      size_t c = a.find(':');
      ir.attrs.push_back({trim(a.substr(0, c)), trim(a.substr(c + 1))});
    }
  }
  return ir;
}

// Registered at load, like the op_proto library's static OperatorCreatorRegister objects.
struct RegisterAll {
  RegisterAll() {
    for (const char *line : kIr) {
      auto ir = std::make_shared<Ir>(parse(line));
      ge::OperatorCreatorRegister(ir->type.c_str(), [ir](const ge::AscendString &name) -> ge::Operator {
        return IrOperator(name, *ir);
      });
    }
  }
} register_all;
}  // namespace
