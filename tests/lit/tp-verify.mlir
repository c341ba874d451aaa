// RUN: tpc-opt %s --split-input-file --verify-diagnostics -p tp-verify

func.func @broadcast_mismatch(%a: tensor<2xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{tp.add: The size of tensor a (2) must match the size of tensor b (3)}}
  %0 = "tp.add"(%a, %b) : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @unknown_op(%a: tensor<2xf32>) {
  // expected-error @+1 {{unknown tp op 'tp.expp'; did you mean tp.exp}}
  %0 = "tp.expp"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @wrong_result_type(%a: tensor<2xi32>) {
  // expected-error @+1 {{tp.exp: result 0 has type tensor<2xi32>, but the operands give tensor<2xf32>}}
  %0 = "tp.exp"(%a) : (tensor<2xi32>) -> tensor<2xi32>
  return
}

// -----

func.func @bad_attribute(%a: tensor<2xf32>) {
  // expected-error @+1 {{tp.gelu: attribute 'approximate' must be one of 'none', 'tanh', got 'fast'}}
  %0 = "tp.gelu"(%a) {approximate = "fast"} : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @operand_count(%a: tensor<2xf32>) {
  // expected-error @+1 {{tp.where: expected 3 operand(s)}}
  %0 = "tp.where"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}
