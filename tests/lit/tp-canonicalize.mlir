// RUN: tpc-opt %s -p tp-canonicalize | filecheck %s

// CHECK-LABEL: func.func @add_zero
func.func @add_zero(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK-NEXT: return %arg0 : tensor<2x3xf32>
  %c = "tp.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "tp.add"(%a, %c) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @mul_one_keeps_broadcasting_ops
func.func @mul_one_keeps_broadcasting_ops(%a: tensor<3xf32>) -> tensor<2x3xf32> {
  // x * ones(2, 3) changes the shape, so it stays
  // CHECK-NEXT: %[[C:.*]] = "tp.constant"
  // CHECK-NEXT: %[[M:.*]] = "tp.mul"(%arg0, %[[C]])
  // CHECK-NEXT: return %[[M]]
  %c = "tp.constant"() {value = dense<1.0> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = "tp.mul"(%a, %c) : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @fold_constants
func.func @fold_constants() -> tensor<2xf32> {
  // CHECK-NEXT: %[[C:.*]] = "tp.constant"() {value = dense<[3.000000e+00, 5.000000e+00]> : tensor<2xf32>}
  // CHECK-NEXT: return %[[C]]
  %a = "tp.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %b = "tp.constant"() {value = dense<[2.0, 3.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = "tp.add"(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// CHECK-LABEL: func.func @double_transpose
func.func @double_transpose(%a: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // CHECK-NEXT: return %arg0
  %0 = "tp.permute"(%a) {dims = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %1 = "tp.permute"(%0) {dims = array<i64: 1, 2, 0>} : (tensor<4x2x3xf32>) -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @reshape_chain
func.func @reshape_chain(%a: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  // CHECK-NEXT: %[[R:.*]] = "tp.reshape"(%arg0) {shape = array<i64: 4, 6>}
  // CHECK-NEXT: return %[[R]]
  %0 = "tp.reshape"(%a) {shape = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = "tp.reshape"(%0) {shape = array<i64: 4, 6>} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  return %1 : tensor<4x6xf32>
}

// CHECK-LABEL: func.func @noop_cast_and_broadcast
func.func @noop_cast_and_broadcast(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK-NEXT: return %arg0
  %0 = "tp.cast"(%a) {dtype = f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "tp.broadcast_to"(%0) {shape = array<i64: 2, 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @widening_cast_round_trip
func.func @widening_cast_round_trip(%a: tensor<2xf16>) -> tensor<2xf16> {
  // CHECK-NEXT: return %arg0
  %0 = "tp.cast"(%a) {dtype = f32} : (tensor<2xf16>) -> tensor<2xf32>
  %1 = "tp.cast"(%0) {dtype = f16} : (tensor<2xf32>) -> tensor<2xf16>
  return %1 : tensor<2xf16>
}

// CHECK-LABEL: func.func @narrowing_cast_round_trip_stays
func.func @narrowing_cast_round_trip_stays(%a: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK-NEXT: "tp.cast"(%arg0) {dtype = f16}
  // CHECK-NEXT: "tp.cast"
  %0 = "tp.cast"(%a) {dtype = f16} : (tensor<2xf32>) -> tensor<2xf16>
  %1 = "tp.cast"(%0) {dtype = f32} : (tensor<2xf16>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}

// CHECK-LABEL: func.func @idempotent_with_itself
func.func @idempotent_with_itself(%a: tensor<3xi1>, %x: tensor<3xf32>) -> (tensor<3xi1>, tensor<3xi1>, tensor<3xf32>, tensor<3xi1>) {
  // b & b and a bool times itself are b; max(x, x) is x (NaN too); two equal comparisons
  // are one value, so their & is the comparison and their == a fill
  // CHECK-NEXT: %[[F:.*]] = "tp.full"() {dtype = i1, shape = array<i64: 3>, value = 1.000000e+00 : f64}
  // CHECK-NEXT: return %arg0, %arg0, %arg1, %[[F]]
  %0 = "tp.bitwise_and"(%a, %a) : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %1 = "tp.mul"(%0, %0) : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %2 = "tp.maximum"(%x, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %c = "tp.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %g1 = "tp.gt"(%x, %c) : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
  %g2 = "tp.gt"(%x, %c) : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
  %both = "tp.bitwise_and"(%g1, %g2) : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %3 = "tp.eq"(%both, %g1) : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  return %0, %1, %2, %3 : tensor<3xi1>, tensor<3xi1>, tensor<3xf32>, tensor<3xi1>
}

// CHECK-LABEL: func.func @where_of_a_value_and_its_cast
func.func @where_of_a_value_and_its_cast(%b: tensor<3xi1>, %x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<2x3xf32>) {
  // either branch is the other one in the result's dtype: the result is that branch; a
  // condition that broadcasts the result to more dims keeps the where
  // CHECK-NEXT: %[[F:.*]] = "tp.cast"(%arg0) {dtype = f32}
  // CHECK-NEXT: %[[K:.*]] = "tp.constant"
  // CHECK-NEXT: %[[W:.*]] = "tp.where"(%[[K]], %arg0, %[[F]])
  // CHECK-NEXT: return %[[F]], %arg1, %[[W]]
  %f = "tp.cast"(%b) {dtype = f32} : (tensor<3xi1>) -> tensor<3xf32>
  %c = "tp.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %g = "tp.gt"(%f, %c) : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
  %0 = "tp.where"(%g, %b, %f) : (tensor<3xi1>, tensor<3xi1>, tensor<3xf32>) -> tensor<3xf32>
  %1 = "tp.where"(%g, %x, %x) : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %k = "tp.constant"() {value = dense<true> : tensor<2x1xi1>} : () -> tensor<2x1xi1>
  %2 = "tp.where"(%k, %b, %f) : (tensor<2x1xi1>, tensor<3xi1>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<2x3xf32>
}
