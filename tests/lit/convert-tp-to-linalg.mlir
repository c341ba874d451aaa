// RUN: tpc-opt %s -p convert-tp-to-linalg | filecheck %s
// RUN: tpc-opt %s -p 'convert-tp-to-linalg{depthwise-conv=false}' | filecheck %s --check-prefix=GROUPED
// RUN: tpc-opt %s -p 'convert-tp-to-linalg{conv-by-columns=false}' | filecheck %s --check-prefix=NATIVE

// Broadcast operands are read through indexing maps; nothing is materialized.
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[WIN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d3, d0, d1 + d4, d2 + d5)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG: #[[KM:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG: #[[KN:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[MN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>

// CHECK-LABEL: func.func @broadcast_add
func.func @broadcast_add(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
  // CHECK-NEXT: %[[G:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]} ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<8xf32>) outs(%[[E]] : tensor<4x8xf32>)
  // CHECK-NEXT: ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32, %{{.*}}: f32):
  // CHECK-NEXT:   %[[S:.*]] = arith.addf %[[X]], %[[Y]] : f32
  // CHECK-NEXT:   linalg.yield %[[S]] : f32
  // CHECK-NEXT: } -> tensor<4x8xf32>
  // CHECK-NEXT: return %[[G]]
  %0 = "tp.add"(%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @size_one_dims_read_index_zero
func.func @size_one_dims_read_index_zero(%a: tensor<4x8xf32>, %b: tensor<4x1xf32>) -> tensor<4x8xf32> {
  // CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[COL]], #[[ID]]]
  // CHECK: arith.mulf
  %0 = "tp.mul"(%a, %b) : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Half types compute in f32 and round once; int operands convert with sitofp.
// CHECK-LABEL: func.func @mixed_dtypes
func.func @mixed_dtypes(%a: tensor<3xf16>, %b: tensor<3xi32>) -> tensor<3xf16> {
  // CHECK: ^bb0(%[[X:.*]]: f16, %[[Y:.*]]: i32, %{{.*}}: f16):
  // CHECK-NEXT: %[[XF:.*]] = arith.extf %[[X]] : f16 to f32
  // CHECK-NEXT: %[[YF:.*]] = arith.sitofp %[[Y]] : i32 to f32
  // CHECK-NEXT: %[[S:.*]] = arith.mulf %[[XF]], %[[YF]] : f32
  // CHECK-NEXT: %[[R:.*]] = arith.truncf %[[S]] : f32 to f16
  // CHECK-NEXT: linalg.yield %[[R]] : f16
  %0 = "tp.mul"(%a, %b) : (tensor<3xf16>, tensor<3xi32>) -> tensor<3xf16>
  return %0 : tensor<3xf16>
}

// Float to int casts truncate toward zero (fptosi); to bool they test for nonzero.
// CHECK-LABEL: func.func @casts
func.func @casts(%a: tensor<3xf32>) -> (tensor<3xi32>, tensor<3xi1>) {
  // CHECK: arith.fptosi %{{.*}} : f32 to i32
  // CHECK: arith.cmpf une, %{{.*}}, %{{.*}} : f32
  %0 = "tp.cast"(%a) {dtype = i32} : (tensor<3xf32>) -> tensor<3xi32>
  %1 = "tp.cast"(%a) {dtype = i1} : (tensor<3xf32>) -> tensor<3xi1>
  return %0, %1 : tensor<3xi32>, tensor<3xi1>
}

// Dynamic sizes come from the operands with tensor.dim.
// CHECK-LABEL: func.func @dynamic
func.func @dynamic(%a: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // CHECK: %[[D:.*]] = tensor.dim %arg0, %{{.*}} : tensor<?x8xf32>
  // CHECK-NEXT: tensor.empty(%[[D]]) : tensor<?x8xf32>
  // CHECK: math.exp
  %0 = "tp.exp"(%a) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// CHECK-LABEL: func.func @fill_and_range
func.func @fill_and_range() -> (tensor<2x3xf32>, tensor<4xi64>) {
  // CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x3xf32>)
  // CHECK: linalg.index 0
  %0 = "tp.full"() {shape = array<i64: 2, 3>, value = 1.5, dtype = f32} : () -> tensor<2x3xf32>
  %1 = "tp.arange"() {start = 0.0, end = 4.0, step = 1.0, dtype = i64} : () -> tensor<4xi64>
  return %0, %1 : tensor<2x3xf32>, tensor<4xi64>
}

// A weight's gradient (x^T g)^T is computed as g^T x: the transpose of a product is the
// product of the operands in the other order, read through swapped maps (IREE's CPU code
// runs the transposed-result form 3x slower).
// CHECK-LABEL: func.func @weight_gradient
func.func @weight_gradient(%x: tensor<64x300xf32>, %g: tensor<64x200xf32>) -> tensor<200x300xf32> {
  // CHECK: %[[W:.*]] = linalg.matmul indexing_maps = [#[[KM]], #[[KN]], #[[MN]]] ins(%arg1, %arg0 : tensor<64x200xf32>, tensor<64x300xf32>) outs(%{{.*}} : tensor<200x300xf32>)
  // CHECK-NEXT: return %[[W]]
  %xt = "tp.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<64x300xf32>) -> tensor<300x64xf32>
  %p = "tp.matmul"(%xt, %g) : (tensor<300x64xf32>, tensor<64x200xf32>) -> tensor<300x200xf32>
  %w = "tp.permute"(%p) {dims = array<i64: 1, 0>} : (tensor<300x200xf32>) -> tensor<200x300xf32>
  return %w : tensor<200x300xf32>
}

// A product read elsewhere too is transposed (computing it twice would cost more), behind a
// fence: IREE would fold the transpose into the contraction, writing through permuted dims.
// CHECK-LABEL: func.func @product_used_twice
func.func @product_used_twice(%a: tensor<4x6xf32>, %b: tensor<6x5xf32>) -> (tensor<5x4xf32>, tensor<4x5xf32>) {
  // CHECK: %[[P:.*]] = linalg.matmul ins(%arg0, %arg1
  // CHECK: %[[F:.*]] = iree_tensor_ext.compute_barrier.start %[[P]]
  // CHECK: %[[T:.*]] = linalg.transpose ins(%[[F]] : tensor<4x5xf32>)
  // CHECK-NOT: linalg.matmul
  // CHECK: return %[[T]], %[[P]]
  %p = "tp.matmul"(%a, %b) : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  %t = "tp.permute"(%p) {dims = array<i64: 1, 0>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
  return %t, %p : tensor<5x4xf32>, tensor<4x5xf32>
}

// Attention's (att @ v).transpose(1, 2): the batched product stays a plain batched product.
// CHECK-LABEL: func.func @heads_back_to_tokens
func.func @heads_back_to_tokens(%att: tensor<2x4x8x8xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32> {
  // CHECK: %[[P:.*]] = linalg.batch_matmul
  // CHECK: %[[E:.*]] = tensor.expand_shape %[[P]]
  // CHECK: %[[F:.*]] = iree_tensor_ext.compute_barrier.start %[[E]]
  // CHECK: linalg.transpose ins(%[[F]] : tensor<2x4x8x16xf32>) outs(%{{.*}} : tensor<2x8x4x16xf32>) permutation = [0, 2, 1, 3]
  %y = "tp.matmul"(%att, %v) : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %t = "tp.permute"(%y) {dims = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x16xf32>) -> tensor<2x8x4x16xf32>
  return %t : tensor<2x8x4x16xf32>
}

// A window op reads its padded input only as far as its windows reach, (out - 1) * stride +
// dilation * (kernel - 1) + 1 = 3 rows and columns here: the fourth is cut off, so that IREE,
// dropping the unit output dims, infers the window loops from an input of the kernel's size.
// A strided convolution (by default: conv-by-columns) gathers each output position's window
// into columns [n, c*kh*kw, oh*ow] that one contraction multiplies by the filter matrix.
// CHECK-LABEL: func.func @strided_conv_of_a_small_input
// NATIVE-LABEL: func.func @strided_conv_of_a_small_input
func.func @strided_conv_of_a_small_input(%x: tensor<1x4x2x2xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x1x1xf32> {
  // CHECK: %[[P:.*]] = tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 1, 1]
  // CHECK: } : tensor<1x4x2x2xf32> to tensor<1x4x4x4xf32>
  // CHECK-NEXT: %[[C:.*]] = tensor.extract_slice %[[P]][0, 0, 0, 0] [1, 4, 3, 3] [1, 1, 1, 1] : tensor<1x4x4x4xf32> to tensor<1x4x3x3xf32>
  // CHECK-NOT: linalg.conv_2d_nchw_fchw
  // CHECK: %[[COLS:.*]] = linalg.generic {indexing_maps = [#[[WINDOW:.*]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%[[C]] : tensor<1x4x3x3xf32>) outs(%{{.*}} : tensor<1x4x3x3x1x1xf32>)
  // CHECK: %[[F:.*]] = tensor.collapse_shape %arg1 {{\[}}[0], [1, 2, 3]] : tensor<8x4x3x3xf32> into tensor<8x36xf32>
  // CHECK: %[[M:.*]] = tensor.collapse_shape %[[COLS]] {{\[}}[0], [1, 2, 3], [4, 5]] : tensor<1x4x3x3x1x1xf32> into tensor<1x36x1xf32>
  // CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[F]], %[[M]] : tensor<8x36xf32>, tensor<1x36x1xf32>) outs(%{{.*}} : tensor<1x8x1xf32>)
  // CHECK: arith.mulf
  // CHECK-NEXT: arith.addf
  // NATIVE: %[[P:.*]] = tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 1, 1]
  // NATIVE: %[[C:.*]] = tensor.extract_slice %[[P]][0, 0, 0, 0] [1, 4, 3, 3] [1, 1, 1, 1] : tensor<1x4x4x4xf32> to tensor<1x4x3x3xf32>
  // NATIVE: linalg.conv_2d_nchw_fchw {{.*}} ins(%[[C]], %arg1 : tensor<1x4x3x3xf32>, tensor<8x4x3x3xf32>)
  %0 = "tp.conv2d"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0>, padding = array<i64: 1, 1, 1, 1>, stride = array<i64: 2, 2>} : (tensor<1x4x2x2xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x1x1xf32>
  return %0 : tensor<1x8x1x1xf32>
}

// CHECK-LABEL: func.func @floor_mode_pool_leaves_a_row_unread
func.func @floor_mode_pool_leaves_a_row_unread(%x: tensor<1x2x3x3xf32>) -> tensor<1x2x1x1xf32> {
  // CHECK: %[[C:.*]] = tensor.extract_slice %arg0[0, 0, 0, 0] [1, 2, 2, 2] [1, 1, 1, 1] : tensor<1x2x3x3xf32> to tensor<1x2x2x2xf32>
  // CHECK: linalg.pooling_nchw_max {{.*}} ins(%[[C]], %{{.*}} : tensor<1x2x2x2xf32>, tensor<2x2xf32>)
  %0 = "tp.max_pool2d"(%x) {ceil_mode = false, dilation = array<i64: 1, 1>, kernel_size = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : (tensor<1x2x3x3xf32>) -> tensor<1x2x1x1xf32>
  return %0 : tensor<1x2x1x1xf32>
}

// A strided depthwise convolution; iree-vulkan (depthwise-conv=false) lowers it as a grouped
// convolution of one filter per group, IREE's SPIR-V code for the depthwise op being wrong.
// CHECK-LABEL: func.func @strided_depthwise_conv
// GROUPED-LABEL: func.func @strided_depthwise_conv
func.func @strided_depthwise_conv(%x: tensor<1x4x9x9xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x4x4xf32> {
  // CHECK: linalg.depthwise_conv_2d_nchw_chw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
  // GROUPED-NOT: linalg.depthwise_conv_2d_nchw_chw
  // GROUPED: linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%{{.*}}, %{{.*}} : tensor<1x4x1x9x9xf32>, tensor<4x1x1x3x3xf32>)
  %0 = "tp.conv2d"(%x, %w) {dilation = array<i64: 1, 1>, groups = 4 : i64, operandSegmentSizes = array<i32: 1, 1, 0>, padding = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>} : (tensor<1x4x9x9xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// A convolution over few output positions with a long reduction (c*kh*kw = 288 >= 256): its
// columns are laid out [c*kh*kw, n*oh*ow] for one linalg.matmul (data tiling and microkernels
// apply), fenced so that IREE does not fold the transpose back to NCHW into it; the window map
// (WIN, checked at the top) reads the padded input at (n, c, oh + kh, ow + kw). Half types
// accumulate in float32.
// CHECK-LABEL: func.func @long_reduction_conv_by_matmul
// NATIVE-LABEL: func.func @long_reduction_conv_by_matmul
func.func @long_reduction_conv_by_matmul(%x: tensor<2x32x4x4xf16>, %w: tensor<16x32x3x3xf16>) -> tensor<2x16x4x4xf16> {
  // CHECK: %[[COLS:.*]] = linalg.generic {indexing_maps = [#[[WIN]], #{{.*}}]{{.*}} outs(%{{.*}} : tensor<32x3x3x2x4x4xf16>)
  // CHECK: %[[F:.*]] = tensor.collapse_shape %arg1 {{\[}}[0], [1, 2, 3]] : tensor<16x32x3x3xf16> into tensor<16x288xf16>
  // CHECK: %[[M:.*]] = tensor.collapse_shape %[[COLS]] {{\[}}[0, 1, 2], [3, 4, 5]] : tensor<32x3x3x2x4x4xf16> into tensor<288x32xf16>
  // CHECK: %[[PROD:.*]] = linalg.matmul ins(%[[F]], %[[M]] : tensor<16x288xf16>, tensor<288x32xf16>) outs(%{{.*}} : tensor<16x32xf32>)
  // CHECK: %[[FENCED:.*]] = iree_tensor_ext.compute_barrier.start %[[PROD]]
  // CHECK: tensor.expand_shape %[[FENCED]] {{\[}}[0], [1, 2]] output_shape [16, 2, 16]
  // CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x16x16xf32>)
  // CHECK: arith.truncf %{{.*}} : f32 to f16
  // NATIVE: linalg.conv_2d_nchw_fchw {{.*}} outs(%{{.*}} : tensor<2x16x4x4xf32>)
  %0 = "tp.conv2d"(%x, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, operandSegmentSizes = array<i32: 1, 1, 0>, padding = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x32x4x4xf16>, tensor<16x32x3x3xf16>) -> tensor<2x16x4x4xf16>
  return %0 : tensor<2x16x4x4xf16>
}
