// RUN: tpc-opt %s | tpc-opt | filecheck %s --check-prefix=ROUND
// RUN: tpc-opt %s -p tp-to-linalg | filecheck %s
// A loop over a symbolic number of steps (s0) and batch (s1): printed and parsed back as it
// is, then lowered to one scf.for whose trip count is dim 0 of the sequence, slicing each
// step at length - 1 - i (reverse) and calling the body, a private function.

// ROUND-LABEL: func.func private @step(
// ROUND-LABEL: func.func @rnn(
// ROUND: "tp.scan"(%arg0, %arg1, %arg2) {body = @step, length = "s0", num_carries = 1 : i64, num_xs = 1 : i64, reverse = true, tp.shapes = {{\[\["s1", 4\], \["s0", "s1", 4\]\]}}}

// CHECK-LABEL: func.func private @step(
// CHECK: linalg.matmul
// CHECK: math.tanh
// CHECK-LABEL: func.func @rnn(
// The loop starts from placeholders (fills with numbers of their own); its first step takes
// the initial state %arg0 as a loop invariant and makes the stacked output's buffer.
// CHECK: %[[T:.*]] = tensor.dim %arg1, %{{.*}} : tensor<?x?x4xf32>
// CHECK: %[[H0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?x4xf32>)
// CHECK: %[[ACC0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?x?x4xf32>)
// CHECK: %[[LOOP:.*]]:2 = scf.for %[[I:.*]] = %{{.*}} to %[[T]] step %{{.*}} iter_args(%[[H:.*]] = %[[H0]], %[[YS:.*]] = %[[ACC0]])
// CHECK: %[[LAST:.*]] = arith.subi %[[T]], %{{.*}} : index
// CHECK: %[[AT:.*]] = arith.subi %[[LAST]], %[[I]] : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[I]], %{{.*}} : index
// CHECK: %[[STATE:.*]] = arith.select %[[FIRST]], %arg0, %[[H]] : tensor<?x4xf32>
// CHECK: %[[MADE:.*]] = scf.if %[[FIRST]] -> (tensor<?x?x4xf32>) {
// CHECK:   linalg.fill
// CHECK: } else {
// CHECK:   scf.yield %[[YS]]
// CHECK: %[[OUT:.*]] = flow.tensor.tie_shape %[[MADE]]
// CHECK: %[[X:.*]] = tensor.extract_slice %arg1[%[[AT]], 0, 0] [1, %{{.*}}, 4] [1, 1, 1] : tensor<?x?x4xf32> to tensor<?x4xf32>
// CHECK: %[[R:.*]]:2 = func.call @step(%[[STATE]], %[[X]], %arg2)
// CHECK: %[[NEW:.*]] = tensor.insert_slice %[[R]]#1 into %[[OUT]][%[[AT]], 0, 0]
// CHECK: scf.yield %[[R]]#0, %[[NEW]]
// CHECK: %[[H_T:.*]] = flow.tensor.tie_shape %[[LOOP]]#0
// CHECK: %[[YS_T:.*]] = flow.tensor.tie_shape %[[LOOP]]#1
// CHECK: return %[[H_T]], %[[YS_T]]
func.func private @step(%h: tensor<?x4xf32>, %x: tensor<?x4xf32>, %w: tensor<4x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) attributes {tp.arg_shapes = [["s1", 4], ["s1", 4], [4, 4]]} {
  %0 = "tp.matmul"(%h, %w) {tp.shapes = [["s1", 4]]} : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %1 = "tp.add"(%0, %x) {tp.shapes = [["s1", 4]]} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %2 = "tp.tanh"(%1) {tp.shapes = [["s1", 4]]} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %2, %2 : tensor<?x4xf32>, tensor<?x4xf32>
}
func.func @rnn(%h0: tensor<?x4xf32>, %xs: tensor<?x?x4xf32>, %w: tensor<4x4xf32>) -> (tensor<?x4xf32>, tensor<?x?x4xf32>) attributes {tp.arg_shapes = [["s1", 4], ["s0", "s1", 4], [4, 4]]} {
  %0:2 = "tp.scan"(%h0, %xs, %w) {body = @step, length = "s0", num_carries = 1 : i64, num_xs = 1 : i64, reverse = true, tp.shapes = [["s1", 4], ["s0", "s1", 4]]} : (tensor<?x4xf32>, tensor<?x?x4xf32>, tensor<4x4xf32>) -> (tensor<?x4xf32>, tensor<?x?x4xf32>)
  return %0#0, %0#1 : tensor<?x4xf32>, tensor<?x?x4xf32>
}
