// RUN: tpc-opt %s -p tp-dce | filecheck %s

// CHECK-LABEL: func.func @unused_chain_is_erased
func.func @unused_chain_is_erased(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: %[[N:.*]] = "tp.neg"(%arg0)
  // CHECK-NEXT: return %[[N]]
  %0 = "tp.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "tp.log"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "tp.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
