// RUN: tpc-opt %s -p tp-cse | filecheck %s

// CHECK-LABEL: func.func @same_ops_merge
func.func @same_ops_merge(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: %[[E:.*]] = "tp.exp"(%arg0)
  // CHECK-NEXT: %[[S:.*]] = "tp.add"(%[[E]], %[[E]])
  // CHECK-NEXT: return %[[S]]
  %0 = "tp.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "tp.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "tp.add"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// CHECK-LABEL: func.func @different_attributes_stay
func.func @different_attributes_stay(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK-NEXT: "tp.gelu"(%arg0) {approximate = "none"}
  // CHECK-NEXT: "tp.gelu"(%arg0) {approximate = "tanh"}
  %0 = "tp.gelu"(%a) {approximate = "none"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "tp.gelu"(%a) {approximate = "tanh"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
