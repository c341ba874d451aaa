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

// -----

func.func private @step(%h: tensor<2x3xf32>, %x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  return %h, %x : tensor<2x3xf32>, tensor<2x3xf32>
}
func.func @scan_sequence_too_short(%h: tensor<2x3xf32>, %xs: tensor<4x2x3xf32>) {
  // expected-error @+1 {{tp.scan: sequence 0 has type tensor<4x2x3xf32>: body @step takes slices of tensor<2x3xf32>, so it must be 5 x tensor<2x3xf32>}}
  %0:2 = "tp.scan"(%h, %xs) {body = @step, length = 5 : i64, num_carries = 1 : i64, num_xs = 1 : i64} : (tensor<2x3xf32>, tensor<4x2x3xf32>) -> (tensor<2x3xf32>, tensor<5x2x3xf32>)
  return
}

// -----

func.func @scan_without_body(%h: tensor<2x3xf32>, %xs: tensor<4x2x3xf32>) {
  // expected-error @+1 {{tp.scan: no function @missing in the module}}
  %0:2 = "tp.scan"(%h, %xs) {body = @missing, length = 4 : i64, num_carries = 1 : i64, num_xs = 1 : i64} : (tensor<2x3xf32>, tensor<4x2x3xf32>) -> (tensor<2x3xf32>, tensor<4x2x3xf32>)
  return
}

// -----

func.func private @step(%h: tensor<2x3xf32>, %x: tensor<2x3xf32>) -> (tensor<2x3xi32>, tensor<2x3xf32>) {
  %0 = "tp.cast"(%h) {dtype = i32} : (tensor<2x3xf32>) -> tensor<2x3xi32>
  return %0, %x : tensor<2x3xi32>, tensor<2x3xf32>
}
func.func @scan_carry_changes_dtype(%h: tensor<2x3xf32>, %xs: tensor<4x2x3xf32>) {
  // expected-error @+1 {{tp.scan: carried value 0: the loop passes tensor<2x3xf32>, body @step takes tensor<2x3xf32> and returns tensor<2x3xi32>; a carried value keeps its type}}
  %0:2 = "tp.scan"(%h, %xs) {body = @step, length = 4 : i64, num_carries = 1 : i64, num_xs = 1 : i64} : (tensor<2x3xf32>, tensor<4x2x3xf32>) -> (tensor<2x3xf32>, tensor<4x2x3xf32>)
  return
}
