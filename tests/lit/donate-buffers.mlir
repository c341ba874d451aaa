// RUN: tpc-opt %s --split-input-file -p donate-buffers | filecheck %s
// RUN: tpc-opt %s --split-input-file -p 'donate-buffers{function=chosen}' | filecheck %s --check-prefix=CHOSEN

// An update with nothing else reading the old value: the function becomes private and a
// public wrapper on buffer views ties output 0 to input 0's buffer.
// CHECK-LABEL: func.func private @sgd_impl(%arg0: tensor<16xf32>, %arg1: tensor<16xf32>) -> tensor<16xf32> {
// CHECK:         arith.subf
// CHECK-LABEL: func.func @sgd(%arg0: !hal.buffer_view, %arg1: !hal.buffer_view) -> !hal.buffer_view
// CHECK-SAME:    iree.abi.stub
// CHECK-SAME:    tensorplay.donated = "0:0"
// CHECK-SAME:    tp.donation = {joined = 0 : i64, tied = "0:0", untied = {}}
// CHECK-NEXT:    %[[W:.*]] = hal.tensor.import %arg0 "input0" : !hal.buffer_view -> tensor<16xf32>
// CHECK-NEXT:    %[[G:.*]] = hal.tensor.import %arg1 "input1" : !hal.buffer_view -> tensor<16xf32>
// CHECK-NEXT:    %[[NEW:.*]] = call @sgd_impl(%[[W]], %[[G]])
// CHECK-NEXT:    %[[TIED:.*]] = hal.tensor.alias %[[NEW]] : tensor<16xf32> to %arg0 : !hal.buffer_view
// CHECK-NEXT:    %[[OUT:.*]] = hal.tensor.export %[[TIED]] "output0" : tensor<16xf32> -> !hal.buffer_view
// CHECK-NEXT:    return %[[OUT]] : !hal.buffer_view
#id = affine_map<(d0) -> (d0)>
func.func @sgd(%w: tensor<16xf32>, %g: tensor<16xf32>) -> tensor<16xf32> attributes {tp.donated = array<i64: 0, 0>} {
  %e = tensor.empty() : tensor<16xf32>
  %new = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %g : tensor<16xf32>, tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %new : tensor<16xf32>
}

// -----

// Another read of the old value (the matmul) that the update does not depend on: the update's
// computed operand is passed through a helper that reads one element of the matmul's result.
// CHECK-LABEL: func.func private @update_then_read_impl(
// CHECK:         %[[FALSE:.*]] = arith.constant false
// CHECK-NEXT:    %[[FLAG:.*]] = util.optimization_barrier %[[FALSE]] : i1
// CHECK:         %[[STEP:.*]] = linalg.generic
// CHECK:         arith.mulf
// CHECK:         %[[READ:.*]] = linalg.matmul {{.*}} ins(%arg1, %arg0 :
// CHECK-NEXT:    %[[AFTER:.*]] = call @update_then_read_after_0(%[[FLAG]], %[[STEP]], %[[READ]]) : (i1, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %[[NEW:.*]] = linalg.generic {{.*}} ins(%arg0, %[[AFTER]] :
// CHECK:         return %[[NEW]], %[[READ]]
// CHECK-LABEL: func.func private @update_then_read_after_0(%arg0: i1, %arg1: tensor<4x4xf32>, %arg2: tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:    %[[SLICE:.*]] = tensor.extract_slice %arg2[0, 0] [1, 1] [1, 1] : tensor<4x4xf32> to tensor<1x1xf32>
// CHECK-NEXT:    %[[ELEM:.*]] = tensor.collapse_shape %[[SLICE]] [] : tensor<1x1xf32> into tensor<f32>
// CHECK:         arith.select %arg0, %{{.*}}, %{{.*}} : f32
// CHECK-LABEL: func.func @update_then_read(%arg0: !hal.buffer_view, %arg1: !hal.buffer_view, %arg2: !hal.buffer_view) -> (!hal.buffer_view, !hal.buffer_view)
// CHECK-SAME:    tensorplay.donated = "0:0"
// CHECK-SAME:    tp.donation = {joined = 1 : i64, tied = "0:0", untied = {}}
// CHECK:         %[[R:.*]]:2 = call @update_then_read_impl(
// CHECK-NEXT:    %[[TIED:.*]] = hal.tensor.alias %[[R]]#0 : tensor<4x4xf32> to %arg0 : !hal.buffer_view
// CHECK-NEXT:    hal.tensor.export %[[TIED]] "output0"
// CHECK-NEXT:    hal.tensor.export %[[R]]#1 "output1"
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> ()>
#map2 = affine_map<(d0, d1, d2) -> (d0, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @update_then_read(%w: tensor<4x4xf32>, %g: tensor<4x4xf32>, %lr: tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) attributes {tp.donated = array<i64: 0, 0>} {
  %cst = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %step = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%g, %lr : tensor<4x4xf32>, tensor<f32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %new = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%w, %step : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %read = linalg.matmul indexing_maps = [#map2, #map3, #map4] ins(%g, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %new, %read : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Refused: the update reads the old value transposed (one kernel writing it would read
// elements it already overwrote), and output 1 is an input itself. Nothing is tied, so the
// function stays as it is and only the report says why.
// CHECK-LABEL: func.func @transposed(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK-SAME:    tp.donation = {joined = 0 : i64, tied = "", untied = {"0" = "its update reads the old value other than element for element (linalg.generic), in what may be one kernel with the write", "1" = "the new value is an input"}}
// CHECK-NOT:   hal.
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func @transposed(%w: tensor<8x8xf32>, %k: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) attributes {tp.donated = array<i64: 0, 0, 1, 1>} {
  %e = tensor.empty() : tensor<8x8xf32>
  %new = linalg.generic {indexing_maps = [#id2, #tr, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%w, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  return %new, %k : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Refused: a size known only at run time, and (output 1) the old value returned as well.
// CHECK-LABEL: func.func @dynamic(
// CHECK-SAME:    tp.donation = {joined = 0 : i64, tied = "", untied = {"0" = "its shape is known only at run time", "1" = "the old value is also returned"}}
// CHECK-NOT:   hal.
#id3 = affine_map<(d0) -> (d0)>
func.func @dynamic(%w: tensor<?xf32>, %v: tensor<8xf32>) -> (tensor<?xf32>, tensor<8xf32>, tensor<8xf32>) attributes {tp.donated = array<i64: 0, 0, 1, 1>} {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %w, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %new = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel"]}
      ins(%w : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %e8 = tensor.empty() : tensor<8xf32>
  %new8 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel"]}
      ins(%v : tensor<8xf32>) outs(%e8 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %new, %new8, %v : tensor<?xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Refused: the other read of the old value gives only a complex tensor, so there is no element
// of its result for the update to wait on.
// CHECK-LABEL: func.func @complex_read(
// CHECK-SAME:    tp.donation = {joined = 0 : i64, tied = "", untied = {"0" = "the old value is read by an op with no int or float tensor result (linalg.generic)"}}
// CHECK-NOT:   hal.
#id4 = affine_map<(d0) -> (d0)>
func.func @complex_read(%w: tensor<64xf32>, %g: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xcomplex<f32>>) attributes {tp.donated = array<i64: 0, 0>} {
  %e = tensor.empty() : tensor<64xf32>
  %gs = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel"]}
      ins(%g : tensor<64xf32>) outs(%e : tensor<64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = math.exp %a : f32
    linalg.yield %x : f32
  } -> tensor<64xf32>
  %new = linalg.generic {indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel"]}
      ins(%w, %gs : tensor<64xf32>, tensor<64xf32>) outs(%e : tensor<64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %ec = tensor.empty() : tensor<64xcomplex<f32>>
  %c = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel"]}
      ins(%w : tensor<64xf32>) outs(%ec : tensor<64xcomplex<f32>>) {
  ^bb0(%a: f32, %o: complex<f32>):
    %z = complex.create %a, %a : complex<f32>
    linalg.yield %z : complex<f32>
  } -> tensor<64xcomplex<f32>>
  return %new, %c : tensor<64xf32>, tensor<64xcomplex<f32>>
}

// -----

// With function=..., only that function is rewritten; another keeps its tp.donated for later.
// An output whose type differs from its input's is never tied.
#id5 = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func private @other_impl(
// CHECK-LABEL: func.func @chosen(
// CHECK-SAME:    tp.donation = {joined = 0 : i64, tied = "", untied = {"0" = "the new value's type tensor<8xf16> is not the input's tensor<8xf32>"}}
// CHECK-LABEL: func.func @other(%arg0: !hal.buffer_view) -> !hal.buffer_view
// CHOSEN-LABEL: func.func @other(
// CHOSEN-SAME:    tp.donated = array<i64: 0, 0>
// CHOSEN-LABEL: func.func @chosen(
// CHOSEN-SAME:    tp.donation = {joined = 0 : i64, tied = "", untied = {"0" = "the new value's type tensor<8xf16> is not the input's tensor<8xf32>"}}
func.func @other(%w: tensor<8xf32>) -> tensor<8xf32> attributes {tp.donated = array<i64: 0, 0>} {
  %e = tensor.empty() : tensor<8xf32>
  %new = linalg.generic {indexing_maps = [#id5, #id5], iterator_types = ["parallel"]}
      ins(%w : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = math.exp %a : f32
    linalg.yield %x : f32
  } -> tensor<8xf32>
  return %new : tensor<8xf32>
}
func.func @chosen(%w: tensor<8xf32>) -> tensor<8xf16> attributes {tp.donated = array<i64: 0, 0>} {
  %e = tensor.empty() : tensor<8xf16>
  %new = linalg.generic {indexing_maps = [#id5, #id5], iterator_types = ["parallel"]}
      ins(%w : tensor<8xf32>) outs(%e : tensor<8xf16>) {
  ^bb0(%a: f32, %o: f16):
    %x = arith.truncf %a : f32 to f16
    linalg.yield %x : f16
  } -> tensor<8xf16>
  return %new : tensor<8xf16>
}
