func.func @mlp_tail(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %zero = "tp.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "tp.add"(%x, %zero) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %1 = "tp.gelu"(%0) {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = "tp.gelu"(%0) {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = "tp.mul"(%1, %2) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = "tp.permute"(%3) {dims = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %5 = "tp.permute"(%4) {dims = array<i64: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %6 = "tp.permute"(%5) {dims = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %6 : tensor<8x4xf32>
}
