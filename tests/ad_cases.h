/* ad_cases.h - the derivative tests' cases (test_autodiff.c checks first derivatives of each, test_hvp.c
 * second derivatives, test_jvp.c forward derivatives): an op or a small program each, a scalar loss 's'.
 * Internal to the tests. */
#ifndef FVM_TESTS_AD_CASES_H
#define FVM_TESTS_AD_CASES_H

#include "ad_util.h"

/* s = sum(y * r): a random projection of an op's result. */
#define PROJ "['p', 'mul', 'y', 'r'], ['s', 'sum', 'p']"

static const gcase ops[] = {
    /* elementwise, unary */
    {"neg", "{'x': 'f64[2,3]', 'r': 'f64[2,3]'}", "[['y', 'neg', 'x'], " PROJ "]", "x", ANY, NULL},
    {"abs", "{'x': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'abs', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"sign (no gradient: zeros)", "{'x': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'sign', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"exp", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'exp', 'x'], " PROJ "]", "x", ANY, NULL},
    {"log", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'log', 'x'], " PROJ "]", "x", POS, NULL},
    {"log1p", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'log1p', 'x'], " PROJ "]", "x", POS, NULL},
    {"log1p near 0 and below", "{'x': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'log1p', 'x'], " PROJ "]", "x", ANY,
     "{'x': [-0.5, -0.001, 1e-9, 0.0, 0.75]}"},
    {"sqrt", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'sqrt', 'x'], " PROJ "]", "x", POS, NULL},
    {"sin", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'sin', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"cos", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'cos', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"tanh", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'tanh', 'x'], " PROJ "]", "x", ANY, NULL},
    {"sigmoid", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'sigmoid', 'x'], " PROJ "]", "x", ANY, NULL},
    {"softplus", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'softplus', 'x'], " PROJ "]", "x", ANY, NULL},
    {"erf", "{'x': 'f64[6]', 'r': 'f64[6]'}", "[['y', 'erf', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"relu", "{'x': 'f64[6]', 'r': 'f64[6]'}", "[['y', 'relu', 'x'], " PROJ "]", "x", AWAY, NULL},
    {"cast", "{'x': 'f64[3]', 'r': 'f64[3]'}", "[['y', 'cast', {'dtype': 'f64'}, 'x'], " PROJ "]", "x", ANY, NULL},
    /* elementwise, binary, with broadcasting */
    {"add [2,3]+[3] wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'add', 'a', 'b'], " PROJ "]",
     "b", ANY, NULL},
    {"add [2,1]+[1,3] wrt a", "{'a': 'f64[2,1]', 'b': 'f64[1,3]', 'r': 'f64[2,3]'}",
     "[['y', 'add', 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"sub scalar-[4] wrt a", "{'a': 'f64[]', 'b': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'sub', 'a', 'b'], " PROJ "]", "a",
     ANY, NULL},
    {"sub wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'sub', 'a', 'b'], " PROJ "]", "b", ANY,
     NULL},
    {"mul [2,3]*[2,1] wrt b", "{'a': 'f64[2,3]', 'b': 'f64[2,1]', 'r': 'f64[2,3]'}",
     "[['y', 'mul', 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"mul ? dims wrt a", "{'a': 'f64[?]', 'b': 'f64[]', 'r': 'f64[?]'}", "[['y', 'mul', 'a', 'b'], " PROJ "]", "a", ANY,
     NULL},
    {"div wrt a", "{'a': 'f64[3]', 'b': 'f64[3]', 'r': 'f64[3]'}", "[['y', 'div', 'a', 'b'], " PROJ "]", "a", AWAY,
     NULL},
    {"div [2,3]/[3] wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'div', 'a', 'b'], " PROJ "]",
     "b", AWAY, NULL},
    {"floor_div (no gradient: zeros)", "{'a': 'f64[5]', 'b': 'f64[5]', 'r': 'f64[5]'}",
     "[['y', 'floor_div', 'a', 'b'], " PROJ "]", "a", AWAY, NULL},
    {"mod wrt a", "{'a': 'f64[5]', 'b': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'mod', 'a', 'b'], " PROJ "]", "a", AWAY,
     NULL},
    {"mod [2,3]%[3] wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'mod', 'a', 'b'], " PROJ "]",
     "b", AWAY, NULL},
    {"mod [2,3]%[3] wrt b, fixed", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'mod', 'a', 'b'], " PROJ "]", "b", ANY,
     "{'a': [[7.5, -7.5, 0.3], [-0.3, 5.25, -5.25]], 'b': [2.0, 2.0, -0.7]}"},
    {"pow wrt a", "{'a': 'f64[3]', 'b': 'f64[3]', 'r': 'f64[3]'}", "[['y', 'pow', 'a', 'b'], " PROJ "]", "a", POS,
     NULL},
    {"pow wrt b", "{'a': 'f64[3]', 'b': 'f64[]', 'r': 'f64[3]'}", "[['y', 'pow', 'a', 'b'], " PROJ "]", "b", POS, NULL},
    {"maximum wrt a", "{'a': 'f64[5]', 'b': 'f64[5]', 'r': 'f64[5]'}", "[['y', 'maximum', 'a', 'b'], " PROJ "]", "a",
     AWAY, NULL},
    {"minimum wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'minimum', 'a', 'b'], " PROJ "]",
     "b", AWAY, NULL},
/* clip at points away from the bounds (the rule's kinks): x below, inside and above [lo, hi] */
#define CLIP_X "[-0.9, -0.5, 0.1, 0.3, 0.7, 0.95]"
    {"clip wrt x", "{'x': 'f64[6]', 'lo': 'f64[]', 'hi': 'f64[]', 'r': 'f64[6]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "x", ANY, "{'x': " CLIP_X ", 'lo': -0.3, 'hi': 0.4}"},
    {"clip wrt lo (broadcast)", "{'x': 'f64[6]', 'lo': 'f64[]', 'hi': 'f64[]', 'r': 'f64[6]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "lo", ANY, "{'x': " CLIP_X ", 'lo': -0.3, 'hi': 0.4}"},
    {"clip wrt hi (broadcast)", "{'x': 'f64[6]', 'lo': 'f64[]', 'hi': 'f64[]', 'r': 'f64[6]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "hi", ANY, "{'x': " CLIP_X ", 'lo': -0.3, 'hi': 0.4}"},
    {"clip with lo > hi wrt hi", "{'x': 'f64[6]', 'lo': 'f64[]', 'hi': 'f64[]', 'r': 'f64[6]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "hi", ANY, "{'x': " CLIP_X ", 'lo': 0.5, 'hi': -0.5}"},
    {"clip [2,3] within [2,1] and [3] bounds wrt lo",
     "{'x': 'f64[2,3]', 'lo': 'f64[2,1]', 'hi': 'f64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "lo", ANY,
     "{'x': [[-0.9, 0.1, 0.8], [-0.2, 0.5, 0.9]], 'lo': [[-0.5], [0.2]], 'hi': [0.6, 0.7, 0.3]}"},
    {"clip [2,3] within [2,1] and [3] bounds wrt hi",
     "{'x': 'f64[2,3]', 'lo': 'f64[2,1]', 'hi': 'f64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "hi", ANY,
     "{'x': [[-0.9, 0.1, 0.8], [-0.2, 0.5, 0.9]], 'lo': [[-0.5], [0.2]], 'hi': [0.6, 0.7, 0.3]}"},
    {"clip [2,3] within [2,1] and [3] bounds wrt x",
     "{'x': 'f64[2,3]', 'lo': 'f64[2,1]', 'hi': 'f64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], " PROJ "]", "x", ANY,
     "{'x': [[-0.9, 0.1, 0.8], [-0.2, 0.5, 0.9]], 'lo': [[-0.5], [0.2]], 'hi': [0.6, 0.7, 0.3]}"},
    {"select wrt a", "{'q': 'bool[4]', 'a': 'f64[4]', 'b': 'f64[]', 'r': 'f64[4]'}",
     "[['y', 'select', 'q', 'a', 'b'], " PROJ "]", "a", ANY, "{'q': [true, false, true, false]}"},
    {"select wrt b (broadcast)", "{'q': 'bool[4]', 'a': 'f64[4]', 'b': 'f64[]', 'r': 'f64[4]'}",
     "[['y', 'select', 'q', 'a', 'b'], " PROJ "]", "b", ANY, "{'q': [true, false, true, false]}"},
    /* linear algebra */
    {"matmul", "{'a': 'f64[2,3]', 'b': 'f64[3,4]', 'r': 'f64[2,4]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]", "a", ANY,
     NULL},
    {"matmul wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3,4]', 'r': 'f64[2,4]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]",
     "b", ANY, NULL},
    {"matmul ta", "{'a': 'f64[3,2]', 'b': 'f64[3,4]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_a': true}, 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"matmul ta wrt b", "{'a': 'f64[3,2]', 'b': 'f64[3,4]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_a': true}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"matmul tb", "{'a': 'f64[2,3]', 'b': 'f64[4,3]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_b': true}, 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"matmul tb wrt b", "{'a': 'f64[2,3]', 'b': 'f64[4,3]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_b': true}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"matmul ta tb", "{'a': 'f64[3,2]', 'b': 'f64[4,3]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_a': true, 'transpose_b': true}, 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"matmul ta tb wrt b", "{'a': 'f64[3,2]', 'b': 'f64[4,3]', 'r': 'f64[2,4]'}",
     "[['y', 'matmul', {'transpose_a': true, 'transpose_b': true}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"matmul vec-mat", "{'a': 'f64[3]', 'b': 'f64[3,4]', 'r': 'f64[4]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]", "a",
     ANY, NULL},
    {"matmul vec-mat wrt b", "{'a': 'f64[3]', 'b': 'f64[3,4]', 'r': 'f64[4]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]",
     "b", ANY, NULL},
    {"matmul vec-mat tb wrt b", "{'a': 'f64[3]', 'b': 'f64[4,3]', 'r': 'f64[4]'}",
     "[['y', 'matmul', {'transpose_b': true}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"matmul mat-vec wrt a", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]",
     "a", ANY, NULL},
    {"matmul mat-vec ta wrt a", "{'a': 'f64[3,2]', 'b': 'f64[3]', 'r': 'f64[2]'}",
     "[['y', 'matmul', {'transpose_a': true}, 'a', 'b'], " PROJ "]", "a", ANY, NULL},
    {"matmul mat-vec wrt b", "{'a': 'f64[2,3]', 'b': 'f64[3]', 'r': 'f64[2]'}", "[['y', 'matmul', 'a', 'b'], " PROJ "]",
     "b", ANY, NULL},
    {"matmul dot", "{'a': 'f64[3]', 'b': 'f64[3]'}", "[['s', 'matmul', 'a', 'b']]", "a", ANY, NULL},
    /* reductions */
    {"sum all", "{'x': 'f64[2,3]'}", "[['y', 'sum', 'x'], ['s', 'mul', 'y', 'y']]", "x", ANY, NULL},
    {"sum axis 1", "{'x': 'f64[2,3]', 'r': 'f64[2]'}", "[['y', 'sum', {'axes': [1]}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"sum axes 0,2 keepdims", "{'x': 'f64[2,3,2]', 'r': 'f64[1,3,1]'}",
     "[['y', 'sum', {'axes': [0, -1], 'keepdims': true}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"mean axis 0", "{'x': 'f64[3,2]', 'r': 'f64[2]'}", "[['y', 'mean', {'axes': [0]}, 'x'], " PROJ "]", "x", ANY,
     NULL},
    {"mean ? rows", "{'x': 'f64[?,2]', 'r': 'f64[2]'}", "[['y', 'mean', {'axes': [0]}, 'x'], " PROJ "]", "x", ANY,
     NULL},
    {"max axis 1", "{'x': 'f64[2,4]', 'r': 'f64[2]'}", "[['y', 'max', {'axes': [1]}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"min all", "{'x': 'f64[5]'}", "[['y', 'min', 'x'], ['s', 'mul', 'y', 'y']]", "x", ANY, NULL},
    {"cumsum", "{'x': 'f64[4]', 'r': 'f64[4]'}", "[['y', 'cumsum', {'axis': 0}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"cumsum reversed, last axis", "{'x': 'f64[2,3]', 'r': 'f64[2,3]'}",
     "[['y', 'cumsum', {'axis': -1, 'reverse': true}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"cumsum of the middle axis", "{'x': 'f64[2,3,2]', 'r': 'f64[2,3,2]'}",
     "[['y', 'cumsum', {'axis': 1}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"cumsum reversed, of the middle axis, ? dims", "{'x': 'f64[?,3,?]', 'r': 'f64[?,3,?]'}",
     "[['y', 'cumsum', {'axis': 1, 'reverse': true}, 'x'], " PROJ "]", "x", ANY, NULL},
    /* shapes */
    {"reshape", "{'x': 'f64[2,3]', 'r': 'f64[3,2]'}", "[['y', 'reshape', {'shape': [3, -1]}, 'x'], " PROJ "]", "x", ANY,
     NULL},
    {"expand_dims", "{'x': 'f64[3]', 'r': 'f64[1,3]'}", "[['y', 'expand_dims', {'axes': [0]}, 'x'], " PROJ "]", "x",
     ANY, NULL},
    {"broadcast_to", "{'x': 'f64[3]', 'r': 'f64[2,3]'}", "[['y', 'broadcast_to', {'shape': [2, 3]}, 'x'], " PROJ "]",
     "x", ANY, NULL},
    {"transpose", "{'x': 'f64[2,3,4]', 'r': 'f64[4,2,3]'}", "[['y', 'transpose', {'perm': [2, 0, 1]}, 'x'], " PROJ "]",
     "x", ANY, NULL},
    {"transpose reversed", "{'x': 'f64[2,3]', 'r': 'f64[3,2]'}", "[['y', 'transpose', 'x'], " PROJ "]", "x", ANY, NULL},
    {"slice", "{'x': 'f64[5,4]', 'r': 'f64[2,2]'}",
     "[['y', 'slice', {'start': [1, 0], 'stop': [5, 4], 'step': [2, 3]}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"concat axis 1", "{'a': 'f64[2,2]', 'b': 'f64[2,3]', 'r': 'f64[2,5]'}",
     "[['y', 'concat', {'axis': 1}, 'a', 'b'], " PROJ "]", "b", ANY, NULL},
    {"unbroadcast", "{'x': 'f64[2,3]', 'l': 'f64[3]', 'r': 'f64[3]'}", "[['y', 'unbroadcast', 'x', 'l'], " PROJ "]",
     "x", ANY, NULL},
    {"broadcast_like", "{'x': 'f64[3]', 'l': 'f64[2,3]', 'r': 'f64[2,3]'}",
     "[['y', 'broadcast_like', 'x', 'l'], " PROJ "]", "x", ANY, NULL},
    {"reshape_like", "{'x': 'f64[6]', 'l': 'f64[2,3]', 'r': 'f64[2,3]'}", "[['y', 'reshape_like', 'x', 'l'], " PROJ "]",
     "x", ANY, NULL},
    {"unslice", "{'x': 'f64[2]', 'l': 'f64[5]', 'r': 'f64[5]'}",
     "[['y', 'unslice', {'start': [1], 'step': [3]}, 'x', 'l'], " PROJ "]", "x", ANY, NULL},
    /* structs: lifted arithmetic on a model, fields */
    {"struct lifted", "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]'}",
     "[['y', 'mul', 'm', 'k'], ['z', 'mul', 'y', 'm'], ['w', 'field', {'name': 'w'}, 'z'], "
     "['b', 'field', {'name': 'b'}, 'z'], ['sw', 'sum', 'w'], ['sb', 'sum', 'b'], ['s', 'add', 'sw', 'sb']]",
     "m", ANY, NULL},
    {"struct scalar broadcast wrt k", "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]'}",
     "[['y', 'mul', 'm', 'k'], ['z', 'mul', 'y', 'm'], ['w', 'field', {'name': 'w'}, 'z'], "
     "['b', 'field', {'name': 'b'}, 'z'], ['sw', 'sum', 'w'], ['sb', 'sum', 'b'], ['s', 'add', 'sw', 'sb']]",
     "k", ANY, NULL},
    /* neural networks */
    {"softmax", "{'x': 'f64[2,4]', 'r': 'f64[2,4]'}", "[['y', 'softmax', 'x'], " PROJ "]", "x", ANY, NULL},
    {"softmax axis 0", "{'x': 'f64[3,2]', 'r': 'f64[3,2]'}", "[['y', 'softmax', {'axis': 0}, 'x'], " PROJ "]", "x", ANY,
     NULL},
    {"log_softmax", "{'x': 'f64[2,4]', 'r': 'f64[2,4]'}", "[['y', 'log_softmax', 'x'], " PROJ "]", "x", ANY, NULL},
    {"softmax_cross_entropy", "{'x': 'f64[3,4]', 'l': 'i32[3]', 'r': 'f64[3]'}",
     "[['y', 'softmax_cross_entropy', 'x', 'l'], " PROJ "]", "x", ANY, "{'l': [2, 0, 3]}"},
    {"conv2d SAME wrt x", "{'x': 'f64[2,5,4,2]', 'w': 'f64[3,3,2,3]', 'r': 'f64[2,5,4,3]'}",
     "[['y', 'conv2d', 'x', 'w'], " PROJ "]", "x", ANY, NULL},
    {"conv2d SAME wrt w", "{'x': 'f64[2,5,4,2]', 'w': 'f64[3,3,2,3]', 'r': 'f64[2,5,4,3]'}",
     "[['y', 'conv2d', 'x', 'w'], " PROJ "]", "w", ANY, NULL},
    {"conv2d VALID stride 2 wrt x", "{'x': 'f64[1,6,7,1]', 'w': 'f64[2,3,1,2]', 'r': 'f64[1,3,3,2]'}",
     "[['y', 'conv2d', {'strides': [2, 2], 'padding': 'VALID'}, 'x', 'w'], " PROJ "]", "x", ANY, NULL},
    {"conv2d VALID stride 2 wrt w", "{'x': 'f64[1,6,7,1]', 'w': 'f64[2,3,1,2]', 'r': 'f64[1,3,3,2]'}",
     "[['y', 'conv2d', {'strides': [2, 2], 'padding': 'VALID'}, 'x', 'w'], " PROJ "]", "w", ANY, NULL},
    {"max_pool", "{'x': 'f64[1,4,4,2]', 'r': 'f64[1,2,2,2]'}", "[['y', 'max_pool', {'window': [2, 2]}, 'x'], " PROJ "]",
     "x", ANY, NULL},
    {"avg_pool SAME stride 2", "{'x': 'f64[1,5,5,1]', 'r': 'f64[1,3,3,1]'}",
     "[['y', 'avg_pool', {'window': [3, 3], 'strides': [2, 2], 'padding': 'SAME'}, 'x'], " PROJ "]", "x", ANY, NULL},
    {"one_hot labels in a loss (no gradient to the labels)", "{'x': 'f64[3,4]', 'l': 'i32[3]'}",
     "[['h', 'one_hot', {'n': 4, 'dtype': 'f64'}, 'l'], ['p', 'log_softmax', 'x'], ['q', 'mul', 'h', 'p'], "
     "['s', 'sum', 'q']]",
     "x", ANY, "{'l': [2, 0, 5]}"},
    {"dim of a ? axis in a mean (no gradient through the size)", "{'x': 'f64[?]'}",
     "[['n', 'dim', {'axis': 0}, 'x'], ['f', 'cast', {'dtype': 'f64'}, 'n'], ['q', 'mul', 'x', 'x'], "
     "['t', 'sum', 'q'], ['s', 'div', 't', 'f']]",
     "x", ANY, NULL},
    {"embedding", "{'t': 'f64[5,3]', 'i': 'i32[4]', 'r': 'f64[4,3]'}", "[['y', 'embedding', 't', 'i'], " PROJ "]", "t",
     ANY, "{'i': [1, 4, 1, 0]}"},
    {"gather axis 1", "{'x': 'f64[2,4]', 'i': 'i64[3]', 'r': 'f64[2,3]'}",
     "[['y', 'gather', {'axis': 1}, 'x', 'i'], " PROJ "]", "x", ANY, "{'i': [3, 3, 0]}"},
    {"scatter_add wrt updates", "{'l': 'f64[4]', 'i': 'i32[3]', 'u': 'f64[3]', 'r': 'f64[4]'}",
     "[['y', 'scatter_add', 'l', 'i', 'u'], " PROJ "]", "u", ANY, "{'i': [2, 0, 2]}"},
    {"dropout", "{'x': 'f64[20]', 'k': 'u32[2]', 'r': 'f64[20]'}",
     "[['y', 'dropout', {'rate': 0.4}, 'x', 'k'], " PROJ "]", "x", ANY, "{'k': [0, 42]}"},
    {"layer_norm wrt x", "{'x': 'f64[2,4]', 'g': 'f64[4]', 'b': 'f64[4]', 'r': 'f64[2,4]'}",
     "[['y', 'layer_norm', 'x', 'g', 'b'], " PROJ "]", "x", ANY, NULL},
    {"layer_norm wrt gamma", "{'x': 'f64[2,4]', 'g': 'f64[4]', 'b': 'f64[4]', 'r': 'f64[2,4]'}",
     "[['y', 'layer_norm', 'x', 'g', 'b'], " PROJ "]", "g", ANY, NULL},
    {"layer_norm wrt beta", "{'x': 'f64[2,4]', 'g': 'f64[4]', 'b': 'f64[4]', 'r': 'f64[2,4]'}",
     "[['y', 'layer_norm', 'x', 'g', 'b'], " PROJ "]", "b", ANY, NULL},
#define LSTM_P \
    "{'x': 'f64[2,3]', 'h': 'f64[2,2]', 'c': 'f64[2,2]', 'p': '<wx=f64[3,8],wh=f64[2,8],b=f64[8]>', " \
    "'r1': 'f64[2,2]', 'r2': 'f64[2,2]'}"
#define LSTM_B \
    "[['y', 'lstm_cell', 'x', 'h', 'c', 'p'], ['hn', 'field', {'name': 'h'}, 'y'], " \
    "['cn', 'field', {'name': 'c'}, 'y'], ['a', 'mul', 'hn', 'r1'], ['b', 'mul', 'cn', 'r2'], " \
    "['sa', 'sum', 'a'], ['sb', 'sum', 'b'], ['s', 'add', 'sa', 'sb']]"
    {"lstm_cell wrt x", LSTM_P, LSTM_B, "x", ANY, NULL},
    {"lstm_cell wrt h", LSTM_P, LSTM_B, "h", ANY, NULL},
    {"lstm_cell wrt c", LSTM_P, LSTM_B, "c", ANY, NULL},
    {"lstm_cell wrt parameters", LSTM_P, LSTM_B, "p", ANY, NULL},
    {"global_norm", "{'m': '<w=f64[2,2],b=f64[2]>'}", "[['s', 'global_norm', 'm']]", "m", ANY, NULL},
    {"clip_by_global_norm, clipped", "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]', 'r': '<w=f64[2,2],b=f64[2]>'}",
     "[['y', 'clip_by_global_norm', 'm', 'k'], ['p', 'mul', 'y', 'r'], ['pw', 'field', {'index': 0}, 'p'], "
     "['pb', 'field', {'index': 1}, 'p'], ['sw', 'sum', 'pw'], ['sb', 'sum', 'pb'], ['s', 'add', 'sw', 'sb']]",
     "m", ANY, "{'k': 0.5}"},
    {"clip_by_global_norm, wrt the bound", "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]', 'r': '<w=f64[2,2],b=f64[2]>'}",
     "[['y', 'clip_by_global_norm', 'm', 'k'], ['p', 'mul', 'y', 'r'], ['pw', 'field', {'index': 0}, 'p'], "
     "['pb', 'field', {'index': 1}, 'p'], ['sw', 'sum', 'pw'], ['sb', 'sum', 'pb'], ['s', 'add', 'sw', 'sb']]",
     "k", ANY, "{'k': 0.5}"},
    {"clip_by_global_norm, within the bound",
     "{'m': '<w=f64[2,2],b=f64[2]>', 'k': 'f64[]', 'r': '<w=f64[2,2],b=f64[2]>'}",
     "[['y', 'clip_by_global_norm', 'm', 'k'], ['p', 'mul', 'y', 'r'], ['pw', 'field', {'index': 0}, 'p'], "
     "['pb', 'field', {'index': 1}, 'p'], ['sw', 'sum', 'pw'], ['sb', 'sum', 'pb'], ['s', 'add', 'sw', 'sb']]",
     "m", ANY, "{'k': 100.0}"},
/* mixed f32/f64 structs: each leaf's cotangent keeps its leaf's dtype */
#define MIXED_SUM \
    "['pa', 'field', {'name': 'a'}, 'p'], ['pb', 'field', {'name': 'b'}, 'p'], " \
    "['sa', 'sum', 'pa'], ['sb', 'sum', 'pb'], ['ca', 'cast', {'dtype': 'f64'}, 'sa'], " \
    "['cb', 'cast', {'dtype': 'f64'}, 'sb'], ['s', 'add', 'ca', 'cb']"
    {"cast of a mixed struct to f64", "{'x': '<a=f32[2],b=f64[3]>', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'cast', {'dtype': 'f64'}, 'x'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "x", ANY, NULL},
    {"cast of a mixed struct to f32", "{'x': '<a=f32[2],b=f64[3]>', 'r': '<a=f32[2],b=f32[3]>'}",
     "[['y', 'cast', {'dtype': 'f32'}, 'x'], ['q', 'mul', 'y', 'y'], ['p', 'mul', 'q', 'r'], " MIXED_SUM "]", "x", ANY,
     NULL},
    {"erf of a struct", "{'x': '<a=f64[2],b=f64[3]>', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'erf', 'x'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "x", ANY, NULL},
    {"erf of a mixed struct", "{'x': '<a=f32[2],b=f64[3]>', 'r': '<a=f32[2],b=f64[3]>'}",
     "[['y', 'erf', 'x'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "x", ANY, NULL},
#define CLIP_M "{'x': {'a': [-0.9, 0.1], 'b': [0.3, 0.7, -0.5]}, 'lo': -0.3, 'hi': 0.4}"
    {"clip of a struct wrt the struct",
     "{'x': '<a=f64[2],b=f64[3]>', 'lo': 'f64[]', 'hi': 'f64[]', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "x", ANY, CLIP_M},
    {"clip of a struct wrt lo (every leaf)",
     "{'x': '<a=f64[2],b=f64[3]>', 'lo': 'f64[]', 'hi': 'f64[]', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "lo", ANY, CLIP_M},
    {"clip of a struct wrt hi (every leaf)",
     "{'x': '<a=f64[2],b=f64[3]>', 'lo': 'f64[]', 'hi': 'f64[]', 'r': '<a=f64[2],b=f64[3]>'}",
     "[['y', 'clip', 'x', 'lo', 'hi'], ['p', 'mul', 'y', 'r'], " MIXED_SUM "]", "hi", ANY, CLIP_M},
    {"cast of a struct with an integer leaf", "{'x': '<a=f32[2],n=i32[],b=f64[]>', 'r': 'f64[2]'}",
     "[['y', 'cast', {'dtype': 'f64'}, 'x'], ['a', 'field', {'name': 'a'}, 'y'], ['n', 'field', {'name': 'n'}, 'y'], "
     "['b', 'field', {'name': 'b'}, 'y'], ['u', 'mul', 'a', 'r'], ['v', 'mul', 'u', 'n'], ['w', 'mul', 'v', 'b'], "
     "['s', 'sum', 'w']]",
     "x", ANY, "{'x': {'a': [0.5, -0.25], 'n': 3, 'b': 1.5}}"},
    {"struct build and read", "{'a': 'f64[2]', 'b': 'f64[2]'}",
     "[['t', 'struct', {'names': ['u', 'v']}, 'a', 'b'], ['u', 'field', {'index': 0}, 't'], "
     "['v', 'field', {'name': 'v'}, 't'], ['p', 'mul', 'u', 'v'], ['s', 'sum', 'p']]",
     "a", ANY, NULL},
    /* the gradient ops of convolution and pooling (what second derivatives of conv2d and avg_pool run) */
    {"conv2d_grad_input wrt dy",
     "{'dy': 'f64[1,4,4,2]', 'w': 'f64[3,3,1,2]', 'l': 'f64[1,4,4,1]', 'r': 'f64[1,4,4,1]'}",
     "[['y', 'conv2d_grad_input', 'dy', 'w', 'l'], " PROJ "]", "dy", ANY, NULL},
    {"conv2d_grad_input wrt w", "{'dy': 'f64[1,4,4,2]', 'w': 'f64[3,3,1,2]', 'l': 'f64[1,4,4,1]', 'r': 'f64[1,4,4,1]'}",
     "[['y', 'conv2d_grad_input', 'dy', 'w', 'l'], " PROJ "]", "w", ANY, NULL},
    {"conv2d_grad_input VALID stride 2 wrt w",
     "{'dy': 'f64[1,3,3,2]', 'w': 'f64[2,3,1,2]', 'l': 'f64[1,6,7,1]', 'r': 'f64[1,6,7,1]'}",
     "[['y', 'conv2d_grad_input', {'strides': [2, 2], 'padding': 'VALID'}, 'dy', 'w', 'l'], " PROJ "]", "w", ANY, NULL},
    {"conv2d_grad_filter wrt x",
     "{'x': 'f64[2,5,4,2]', 'dy': 'f64[2,5,4,3]', 'l': 'f64[3,3,2,3]', 'r': 'f64[3,3,2,3]'}",
     "[['y', 'conv2d_grad_filter', 'x', 'dy', 'l'], " PROJ "]", "x", ANY, NULL},
    {"conv2d_grad_filter SAME stride 2 wrt dy",
     "{'x': 'f64[1,5,5,2]', 'dy': 'f64[1,3,3,3]', 'l': 'f64[3,3,2,3]', 'r': 'f64[3,3,2,3]'}",
     "[['y', 'conv2d_grad_filter', {'strides': [2, 2]}, 'x', 'dy', 'l'], " PROJ "]", "dy", ANY, NULL},
    {"max_pool_grad wrt dy", "{'x': 'f64[1,4,4,2]', 'dy': 'f64[1,2,2,2]', 'r': 'f64[1,4,4,2]'}",
     "[['y', 'max_pool_grad', {'window': [2, 2]}, 'x', 'dy'], " PROJ "]", "dy", ANY, NULL},
    {"max_pool_grad of overlapping windows wrt dy", "{'x': 'f64[1,4,4,1]', 'dy': 'f64[1,4,4,1]', 'r': 'f64[1,4,4,1]'}",
     "[['y', 'max_pool_grad', {'window': [3, 3], 'strides': [1, 1], 'padding': 'SAME'}, 'x', 'dy'], " PROJ "]", "dy",
     ANY, NULL},
    {"max_pool_gather wrt u", "{'x': 'f64[1,4,4,2]', 'u': 'f64[1,4,4,2]', 'r': 'f64[1,2,2,2]'}",
     "[['y', 'max_pool_gather', {'window': [2, 2]}, 'x', 'u'], " PROJ "]", "u", ANY, NULL},
    {"max_pool_gather SAME stride 2 wrt u", "{'x': 'f64[1,5,5,1]', 'u': 'f64[1,5,5,1]', 'r': 'f64[1,3,3,1]'}",
     "[['y', 'max_pool_gather', {'window': [3, 3], 'strides': [2, 2], 'padding': 'SAME'}, 'x', 'u'], " PROJ "]", "u",
     ANY, NULL},
    {"avg_pool_grad SAME stride 2 wrt dy", "{'x': 'f64[1,5,5,1]', 'dy': 'f64[1,3,3,1]', 'r': 'f64[1,5,5,1]'}",
     "[['y', 'avg_pool_grad', {'window': [3, 3], 'strides': [2, 2], 'padding': 'SAME'}, 'x', 'dy'], " PROJ "]", "dy",
     ANY, NULL},
    /* a destructuring (fields by name, then by position) and scalar literals */
    {"fields and literals", "{'m': '<w=f64[2,2],b=f64[2]>', 'q': '<f64[2],f64[]>'}",
     "[['y', 'mul', 'm', 0.5], ['z', 'mul', 'y', 'm'], [['w', 'b'], 'fields', 'z'], [['u', 'v'], 'fields', 'q'], "
     "['uw', 'mul', 'w', 'v'], ['sw', 'sum', 'uw'], ['bu', 'mul', 'b', 'u'], ['sb', 'sum', 'bu'], "
     "['t', 'add', 'sw', 'sb'], ['s', 'sub', 2, 't']]",
     "m", ANY, NULL},
    {"fields by position wrt the struct", "{'m': '<w=f64[2,2],b=f64[2]>', 'q': '<f64[2],f64[]>'}",
     "[[['u', 'v'], 'fields', 'q'], ['y', 'mul', 'u', 'v'], ['z', 'maximum', 'y', -0.25], ['s', 'sum', 'z']]", "q",
     AWAY, NULL},
};

/* Whole functions: calls, conditionals, loops, sequences, federated programs.
 * Helper functions are given in the case's 'params' slot as extra functions
 * through run_program (below). */
typedef struct pcase {
    const char *name;
    const char *functions; /* JSON object of extra functions */
    const char *params, *body, *wrt;
    domain dom;
    const char *fixed;
} pcase;

static const pcase programs[] = {
    {"call (inlined)", "{'sq': {'params': {'v': 'f64[3]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}}",
     "{'x': 'f64[3]'}", "[['y', 'call', {'fn': 'sq'}, 'x'], ['z', 'call', {'fn': 'sq'}, 'y'], ['s', 'sum', 'z']]", "x",
     ANY, NULL},
    {"cond then",
     "{'a': {'params': {'v': 'f64[2]'}, 'body': [['y', 'exp', 'v']], 'result': 'y'}, "
     "'b': {'params': {'v': 'f64[2]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}}",
     "{'q': 'bool[]', 'x': 'f64[2]'}", "[['y', 'cond', {'then': 'a', 'else': 'b'}, 'q', 'x'], ['s', 'sum', 'y']]", "x",
     ANY, "{'q': true}"},
    {"cond else",
     "{'a': {'params': {'v': 'f64[2]'}, 'body': [['y', 'exp', 'v']], 'result': 'y'}, "
     "'b': {'params': {'v': 'f64[2]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}}",
     "{'q': 'bool[]', 'x': 'f64[2]'}", "[['y', 'cond', {'then': 'a', 'else': 'b'}, 'q', 'x'], ['s', 'sum', 'y']]", "x",
     ANY, "{'q': false}"},
    {"fori wrt init",
     "{'step': {'params': {'i': 'i32[]', 'st': 'f64[2]', 'a': 'f64[2]'}, 'body': "
     "[['fi', 'cast', {'dtype': 'f64'}, 'i'], ['m', 'mul', 'st', 'a'], ['t', 'tanh', 'm'], ['y', 'add', 't', 'fi']], "
     "'result': 'y'}}",
     "{'x': 'f64[2]', 'a': 'f64[2]'}", "[['y', 'fori', {'fn': 'step', 'n': 4}, 'x', 'a'], ['s', 'sum', 'y']]", "x", ANY,
     NULL},
    {"fori wrt extra",
     "{'step': {'params': {'i': 'i32[]', 'st': 'f64[2]', 'a': 'f64[2]'}, 'body': "
     "[['fi', 'cast', {'dtype': 'f64'}, 'i'], ['m', 'mul', 'st', 'a'], ['t', 'tanh', 'm'], ['y', 'add', 't', 'fi']], "
     "'result': 'y'}}",
     "{'x': 'f64[2]', 'a': 'f64[2]'}", "[['y', 'fori', {'fn': 'step', 'n': 4}, 'x', 'a'], ['s', 'sum', 'y']]", "a", ANY,
     NULL},
    {"sequence_reduce wrt extra",
     "{'acc': {'params': {'c': 'f64[]', 'e': 'f64[2]', 'w': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'e', 'w'], ['q', 'mul', 'd', 'd'], ['y', 'add', 'c', 'q']], 'result': 'y'}}",
     "{'xs': 'f64[2]*', 'w': 'f64[2]', 'z': 'f64[]'}", "[['s', 'sequence_reduce', {'fn': 'acc'}, 'xs', 'z', 'w']]", "w",
     ANY, NULL},
    {"sequence_reduce wrt zero",
     "{'acc': {'params': {'c': 'f64[]', 'e': 'f64[2]', 'w': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'e', 'w'], ['q', 'mul', 'd', 'c'], ['y', 'add', 'c', 'q']], 'result': 'y'}}",
     "{'xs': 'f64[2]*', 'w': 'f64[2]', 'z': 'f64[]'}", "[['s', 'sequence_reduce', {'fn': 'acc'}, 'xs', 'z', 'w']]", "z",
     ANY, NULL},
    {"sequence_map then sum",
     "{'lin': {'params': {'e': 'f64[2]', 'w': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'e', 'w'], ['y', 'sigmoid', 'd']], 'result': 'y'}}",
     "{'xs': 'f64[2]*', 'w': 'f64[2]'}",
     "[['ys', 'sequence_map', {'fn': 'lin'}, 'xs', 'w'], ['s', 'sequence_sum', 'ys']]", "w", ANY, NULL},
    {"sequence_take, _skip and _filter on the data, then map and sum wrt the weights",
     "{'lin': {'params': {'e': 'f64[2]', 'w': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'e', 'w'], ['y', 'tanh', 'd']], 'result': 'y'}, "
     "'first_pos': {'params': {'e': 'f64[2]'}, 'body': "
     "[['a', 'slice', {'stop': [1]}, 'e'], ['z', 'zeros_like', 'a'], ['g', 'gt', 'a', 'z'], "
     "['p', 'reshape', {'shape': []}, 'g']], 'result': 'p'}}",
     "{'xs': 'f64[2]*', 'w': 'f64[2]'}",
     "[['a', 'sequence_take', {'n': 2}, 'xs'], ['b', 'sequence_skip', {'n': 1}, 'a'], "
     "['f', 'sequence_filter', {'fn': 'first_pos'}, 'xs'], "
     "['yb', 'sequence_map', {'fn': 'lin'}, 'b', 'w'], ['yf', 'sequence_map', {'fn': 'lin'}, 'f', 'w'], "
     "['sb', 'sequence_sum', 'yb'], ['sf', 'sequence_sum', 'yf'], ['s', 'add', 'sb', 'sf']]",
     "w", ANY, "{'xs': [[0.5, -0.25], [-0.75, 0.5], [0.25, 1.0]]}"},
    {"select_keys then sums (keys repeat)",
     "{'row': {'params': {'t': 'f64[3,2]', 'k': 'i32[]'}, 'body': "
     "[['r', 'gather', 't', 'k'], ['y', 'tanh', 'r']], 'result': 'y'}}",
     "{'keys': 'i32[4]', 'max': 'i32[]', 't': 'f64[3,2]'}",
     "[['sel', 'select_keys', {'fn': 'row'}, 'keys', 'max', 't'], ['ss', 'sequence_sum', 'sel'], ['s', 'sum', 'ss']]",
     "t", ANY, "{'keys': [2, 0, 2, 1], 'max': 3}"},
    /* federated */
    {"broadcast, map, mean",
     "{'cl': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'x', 'w'], ['y', 'mul', 'd', 'd']], 'result': 'y'}}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['s', 'federated_mean', 'l']]",
     "w", ANY, NULL},
    {"map, sum wrt client data",
     "{'cl': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': "
     "[['d', 'matmul', 'x', 'w'], ['y', 'mul', 'd', 'd']], 'result': 'y'}}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['s', 'federated_sum', 'l']]",
     "x", ANY, NULL},
    {"weighted mean of a model",
     "{'cl': {'params': {'w': '<a=f64[2],b=f64[]>', 'x': 'f64[2]'}, 'body': "
     "[['a', 'field', {'name': 'a'}, 'w'], ['b', 'field', {'name': 'b'}, 'w'], ['d', 'matmul', 'x', 'a'], "
     "['e', 'add', 'd', 'b'], ['y', 'mul', 'e', 'e']], 'result': 'y'}}",
     "{'w': '<a=f64[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS', 'n': '{f64[]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['s', 'federated_weighted_mean', 'l', 'n']]",
     "w", POS, NULL},
    {"min and max",
     "{'cl': {'params': {'w': 'f64[]', 'x': 'f64[]'}, 'body': [['y', 'mul', 'w', 'x']], "
     "'result': 'y'}, 'plus': {'params': {'a': 'f64[]', 'b': 'f64[]'}, 'body': [['y', 'add', 'a', 'b']], "
     "'result': 'y'}}",
     "{'w': 'f64[]@SERVER', 'x': '{f64[]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['lo', 'federated_min', 'l'], ['hi', 'federated_max', 'l'], ['s', 'federated_apply', {'fn': 'plus'}, 'lo', 'hi']]",
     "w", AWAY, "{'x': [0.5, -1.25, 2.0]}"},
    {"a small character LSTM unrolled with fori",
     "{'step': {'params': {'t': 'i32[]', 's': '<h=f64[2,3],c=f64[2,3],l=f64[]>', "
     "'m': '<e=f64[5,2],p=<wx=f64[2,12],wh=f64[3,12],b=f64[12]>,d=f64[3,5]>', 'x': 'i32[2,4]'}, 'body': ["
     "['xt', 'gather', {'axis': 1}, 'x', 't'], ['e', 'field', {'name': 'e'}, 'm'], ['v', 'embedding', 'e', 'xt'], "
     "['p', 'field', {'name': 'p'}, 'm'], ['h', 'field', {'name': 'h'}, 's'], ['c', 'field', {'name': 'c'}, 's'], "
     "['n', 'lstm_cell', 'v', 'h', 'c', 'p'], ['hn', 'field', {'name': 'h'}, 'n'], ['cn', 'field', {'name': 'c'}, 'n'], "
     "['d', 'field', {'name': 'd'}, 'm'], ['z', 'matmul', 'hn', 'd'], ['ls', 'softmax_cross_entropy', 'z', 'xt'], "
     "['sl', 'sum', 'ls'], ['l0', 'field', {'name': 'l'}, 's'], ['l', 'add', 'l0', 'sl'], "
     "['r', 'struct', {'names': ['h', 'c', 'l']}, 'hn', 'cn', 'l']], 'result': 'r'}}",
     "{'m': '<e=f64[5,2],p=<wx=f64[2,12],wh=f64[3,12],b=f64[12]>,d=f64[3,5]>', 'x': 'i32[2,4]', 'h0': 'f64[2,3]'}",
     "[['z', 'const', {'value': 0.0, 'dtype': 'f64'}], ['s0', 'struct', {'names': ['h', 'c', 'l']}, 'h0', 'h0', 'z'], "
     "['sf', 'fori', {'fn': 'step', 'n': 4}, 's0', 'm', 'x'], ['s', 'field', {'name': 'l'}, 'sf']]",
     "m", ANY, "{'x': [[1, 4, 0, 2], [3, 3, 1, 0]], 'h0': [[0, 0, 0], [0, 0, 0]]}"},
/* a model of mixed f32/f64 leaves through the federated aggregations */
#define MIXED_FNS \
    "'cl': {'params': {'m': '<a=f32[2],b=f64[]>', 'x': 'f64[2]'}, 'body': " \
    "[['a', 'field', {'name': 'a'}, 'm'], ['b', 'field', {'name': 'b'}, 'm'], " \
    "['x32', 'cast', {'dtype': 'f32'}, 'x'], ['ua', 'mul', 'a', 'x32'], ['sx', 'sum', 'x'], " \
    "['ub', 'mul', 'b', 'sx'], ['y', 'struct', {'names': ['a', 'b']}, 'ua', 'ub']], 'result': 'y'}, " \
    "'sq': {'params': {'u': '<a=f32[2],b=f64[]>'}, 'body': " \
    "[['a', 'field', {'name': 'a'}, 'u'], ['b', 'field', {'name': 'b'}, 'u'], " \
    "['a64', 'cast', {'dtype': 'f64'}, 'a'], ['qa', 'mul', 'a64', 'a64'], ['sa', 'sum', 'qa'], " \
    "['qb', 'mul', 'b', 'b'], ['y', 'add', 'sa', 'qb']], 'result': 'y'}"
    {"federated_mean of a mixed struct", "{" MIXED_FNS "}",
     "{'m': '<a=f32[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['mc', 'federated_broadcast', 'm'], ['u', 'federated_map', {'fn': 'cl'}, 'mc', 'x'], "
     "['v', 'federated_mean', 'u'], ['s', 'federated_apply', {'fn': 'sq'}, 'v']]",
     "m", ANY, NULL},
    {"federated_sum of a mixed struct", "{" MIXED_FNS "}",
     "{'m': '<a=f32[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['mc', 'federated_broadcast', 'm'], ['u', 'federated_map', {'fn': 'cl'}, 'mc', 'x'], "
     "['v', 'federated_sum', 'u'], ['s', 'federated_apply', {'fn': 'sq'}, 'v']]",
     "m", ANY, NULL},
    {"federated_weighted_mean of a mixed struct", "{" MIXED_FNS "}",
     "{'m': '<a=f32[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS', 'n': '{f32[]}@CLIENTS'}",
     "[['mc', 'federated_broadcast', 'm'], ['u', 'federated_map', {'fn': 'cl'}, 'mc', 'x'], "
     "['v', 'federated_weighted_mean', 'u', 'n'], ['s', 'federated_apply', {'fn': 'sq'}, 'v']]",
     "m", POS, NULL},
    {"a mixed-precision linear model (f32 weights, f64 bias)",
     "{'loss': {'params': {'m': '<w=f32[2],b=f64[]>', 'x': 'f64[2]', 'y': 'f64[]'}, 'body': "
     "[['w', 'field', {'name': 'w'}, 'm'], ['b', 'field', {'name': 'b'}, 'm'], ['x32', 'cast', {'dtype': 'f32'}, 'x'], "
     "['z', 'matmul', 'x32', 'w'], ['z64', 'cast', {'dtype': 'f64'}, 'z'], ['p', 'add', 'z64', 'b'], "
     "['e', 'sub', 'p', 'y'], ['l', 'mul', 'e', 'e']], 'result': 'l'}}",
     "{'m': '<w=f32[2],b=f64[]>@SERVER', 'x': '{f64[2]}@CLIENTS', 'y': '{f64[]}@CLIENTS'}",
     "[['mc', 'federated_broadcast', 'm'], ['l', 'federated_map', {'fn': 'loss'}, 'mc', 'x', 'y'], "
     "['s', 'federated_mean', 'l']]",
     "m", ANY, NULL},
    {"zip and apply",
     "{'cl': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': [['y', 'mul', 'w', 'x']], "
     "'result': 'y'}, 'dot': {'params': {'p': '<f64[2],f64[2]>'}, 'body': [['a', 'field', {'index': 0}, 'p'], "
     "['b', 'field', {'index': 1}, 'p'], ['y', 'matmul', 'a', 'b']], 'result': 'y'}}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['wc', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'wc', 'x'], "
     "['t', 'federated_sum', 'l'], ['z', 'federated_zip', 'w', 't'], ['s', 'federated_apply', {'fn': 'dot'}, 'z']]",
     "w", ANY, NULL},
/* Gradients with respect to client values (3 clients, distinct data): one
     * cotangent per client, also where the adjoint is a federated_broadcast
     * (of federated_sum, federated_mean), whose value is all-equal. */
#define FED_FNS \
    "'sq': {'params': {'v': 'f64[2]'}, 'body': [['q', 'mul', 'v', 'v'], ['y', 'sum', 'q']], " \
    "'result': 'y'}, 'sqs': {'params': {'v': 'f64[]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}, " \
    "'plus': {'params': {'a': 'f64[]', 'b': 'f64[]'}, 'body': [['y', 'add', 'a', 'b']], 'result': 'y'}, " \
    "'dot': {'params': {'p': '<f64[2],f64[2]>'}, 'body': [['a', 'field', {'index': 0}, 'p'], " \
    "['b', 'field', {'index': 1}, 'p'], ['y', 'matmul', 'a', 'b']], 'result': 'y'}, " \
    "'cl': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': [['p', 'mul', 'w', 'x'], " \
    "['t', 'tanh', 'p'], ['q', 'mul', 't', 'x'], ['y', 'sum', 'q']], 'result': 'y'}, " \
    "'tnh': {'params': {'v': 'f64[2]'}, 'body': [['y', 'tanh', 'v']], 'result': 'y'}, " \
    "'agg': {'params': {'x': '{f64[2]}@CLIENTS'}, 'body': [['t', 'federated_mean', 'x']], 'result': 't'}, " \
    "'each': {'params': {'a': '{f64[2]}@CLIENTS'}, 'body': [['m', 'federated_map', {'fn': 'tnh'}, 'a']], " \
    "'result': 'm'}"
    {"federated_sum wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'federated_sum', 'x'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "x", ANY, NULL},
    {"federated_mean wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'federated_mean', 'x'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "x", ANY, NULL},
    {"federated_weighted_mean wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS', 'n': '{f64[]}@CLIENTS'}",
     "[['t', 'federated_weighted_mean', 'x', 'n'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "x", POS, NULL},
    {"federated_min and federated_max wrt client values", "{" FED_FNS "}", "{'x': '{f64[]}@CLIENTS'}",
     "[['lo', 'federated_min', 'x'], ['hi', 'federated_max', 'x'], ['s', 'federated_apply', {'fn': 'plus'}, 'lo', 'hi']]",
     "x", AWAY, NULL},
    {"federated_zip wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS', 'y': '{f64[2]}@CLIENTS'}",
     "[['z', 'federated_zip', 'x', 'y'], ['d', 'federated_map', {'fn': 'dot'}, 'z'], ['t', 'federated_sum', 'd'], "
     "['s', 'federated_apply', {'fn': 'sqs'}, 't']]",
     "x", ANY, NULL},
    {"federated_map and federated_broadcast of an aggregate wrt client values", "{" FED_FNS "}",
     "{'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'federated_mean', 'x'], ['b', 'federated_broadcast', 't'], ['l', 'federated_map', {'fn': 'cl'}, 'b', 'x'], "
     "['s', 'federated_sum', 'l']]",
     "x", ANY, NULL},
    {"call of a federated function wrt client values", "{" FED_FNS "}", "{'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'call', {'fn': 'agg'}, 'x'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "x", ANY, NULL},
    {"an all-equal T@CLIENTS parameter through federated_sum", "{" FED_FNS "}", "{'v': 'f64[2]@CLIENTS'}",
     "[['t', 'federated_sum', 'v'], ['s', 'federated_apply', {'fn': 'sq'}, 't']]", "v", ANY, NULL},
    {"an all-equal T@CLIENTS parameter through federated_map", "{" FED_FNS "}",
     "{'v': 'f64[2]@CLIENTS', 'x': '{f64[2]}@CLIENTS'}",
     "[['l', 'federated_map', {'fn': 'cl'}, 'v', 'x'], ['s', 'federated_mean', 'l']]", "v", ANY, NULL},
    {"a struct of client, server and unplaced values", "{" FED_FNS "}",
     "{'m': '<a={f64[2]}@CLIENTS,b=f64[2]@SERVER,c=f64[]>'}",
     "[['a', 'field', {'name': 'a'}, 'm'], ['b', 'field', {'name': 'b'}, 'm'], ['t', 'federated_sum', 'a'], "
     "['z', 'federated_zip', 't', 'b'], ['s', 'federated_apply', {'fn': 'dot'}, 'z']]",
     "m", ANY, NULL},
    /* with respect to server values */
    {"federated_broadcast, map, sum wrt the server value", "{" FED_FNS "}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['b', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'b', 'x'], ['s', 'federated_sum', 'l']]",
     "w", ANY, NULL},
    {"federated_max of a broadcast (every client ties)", "{" FED_FNS "}", "{'w': 'f64[2]@SERVER'}",
     "[['b', 'federated_broadcast', 'w'], ['m', 'federated_max', 'b'], ['s', 'federated_apply', {'fn': 'sq'}, 'm']]",
     "w", ANY, NULL},
    {"federated_min of clients that tie in part", "{" FED_FNS "}", "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['b', 'federated_broadcast', 'w'], ['l', 'federated_zip', 'b', 'x'], ['d', 'federated_map', {'fn': 'dot'}, 'l'], "
     "['m', 'federated_min', 'd'], ['e', 'federated_mean', 'd'], ['s', 'federated_apply', {'fn': 'plus'}, 'm', 'e']]",
     "w", ANY, "{'w': [0.5, -0.25], 'x': [[1.0, 2.0], [1.0, 2.0], [2.0, 3.0]]}"},
    {"a call taking one value per client, given a broadcast", "{" FED_FNS "}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['b', 'federated_broadcast', 'w'], ['m', 'call', {'fn': 'each'}, 'b'], ['l', 'federated_map', {'fn': 'cl'}, 'm', 'x'], "
     "['s', 'federated_sum', 'l']]",
     "w", ANY, NULL},
    {"a struct of client, server and unplaced values wrt the server part", "{" FED_FNS "}",
     "{'m': '<a={f64[2]}@CLIENTS,b=f64[2]@SERVER,c=f64[]>'}",
     "[['a', 'field', {'name': 'a'}, 'm'], ['b', 'field', {'name': 'b'}, 'm'], ['t', 'federated_mean', 'a'], "
     "['z', 'federated_zip', 't', 'b'], ['y', 'federated_apply', {'fn': 'dot'}, 'z'], "
     "['s', 'federated_apply', {'fn': 'sqs'}, 'y']]",
     "m", ANY, NULL},
/* loops and folds that keep their states, and sequences computed from the parameter */
#define SEQ_FNS \
    "'step': {'params': {'i': 'i32[]', 'st': 'f64[2]', 'a': 'f64[2]'}, 'body': " \
    "[['fi', 'cast', {'dtype': 'f64'}, 'i'], ['m', 'mul', 'st', 'a'], ['t', 'tanh', 'm'], ['y', 'add', 't', 'fi']], " \
    "'result': 'y'}, " \
    "'acc': {'params': {'c': 'f64[]', 'e': 'f64[2]', 'w': 'f64[2]'}, 'body': " \
    "[['d', 'matmul', 'e', 'w'], ['q', 'mul', 'd', 'c'], ['t', 'tanh', 'q'], ['y', 'add', 'c', 't']], 'result': 'y'}, " \
    "'sq': {'params': {'v': 'f64[2]'}, 'body': [['q', 'mul', 'v', 'v'], ['y', 'sum', 'q']], 'result': 'y'}, " \
    "'sqs': {'params': {'v': 'f64[]'}, 'body': [['y', 'mul', 'v', 'v']], 'result': 'y'}, " \
    "'lin': {'params': {'e': 'f64[2]', 'w': 'f64[2]'}, 'body': [['d', 'matmul', 'e', 'w'], ['y', 'tanh', 'd']], " \
    "'result': 'y'}, " \
    "'fold': {'params': {'c': 'f64[]', 'p': '<f64[],f64[2]>', 'w': 'f64[2]'}, 'body': " \
    "[['a', 'field', {'index': 0}, 'p'], ['e', 'field', {'index': 1}, 'p'], ['d', 'matmul', 'e', 'w'], " \
    "['u', 'mul', 'a', 'd'], ['h', 'const', {'value': 0.5, 'dtype': 'f64'}], ['ch', 'mul', 'c', 'h'], " \
    "['v', 'add', 'ch', 'u'], ['y', 'tanh', 'v']], 'result': 'y'}"
#define SCAN_BODY \
    "[['sc', 'scan', {'fn': 'step', 'n': 3}, 'x', 'a'], ['st', 'field', {'name': 'states'}, 'sc'], " \
    "['fs', 'field', {'name': 'state'}, 'sc'], ['qs', 'sequence_map', {'fn': 'sq'}, 'st'], " \
    "['s1', 'sequence_sum', 'qs'], ['s2', 'sum', 'fs'], ['s', 'add', 's1', 's2']]"
    {"scan with its states wrt init", "{" SEQ_FNS "}", "{'x': 'f64[2]', 'a': 'f64[2]'}", SCAN_BODY, "x", ANY, NULL},
    {"scan with its states wrt extra", "{" SEQ_FNS "}", "{'x': 'f64[2]', 'a': 'f64[2]'}", SCAN_BODY, "a", ANY, NULL},
#define SEQ_SCAN_BODY \
    "[['sc', 'sequence_scan', {'fn': 'acc'}, 'xs', 'z', 'w'], ['as', 'field', {'name': 'accs'}, 'sc'], " \
    "['fa', 'field', {'name': 'acc'}, 'sc'], ['qs', 'sequence_map', {'fn': 'sqs'}, 'as'], " \
    "['s1', 'sequence_sum', 'qs'], ['s', 'add', 's1', 'fa']]"
    {"sequence_scan with its accumulators wrt extra", "{" SEQ_FNS "}", "{'xs': 'f64[2]*', 'w': 'f64[2]', 'z': 'f64[]'}",
     SEQ_SCAN_BODY, "w", ANY, NULL},
    {"sequence_scan with its accumulators wrt init", "{" SEQ_FNS "}", "{'xs': 'f64[2]*', 'w': 'f64[2]', 'z': 'f64[]'}",
     SEQ_SCAN_BODY, "z", ANY, NULL},
    {"sequence_zip and sequence_reverse of a mapped sequence, folded", "{" SEQ_FNS "}",
     "{'xs': 'f64[2]*', 'w': 'f64[2]', 'z': 'f64[]'}",
     "[['ys', 'sequence_map', {'fn': 'lin'}, 'xs', 'w'], ['p', 'sequence_zip', 'ys', 'xs'], "
     "['r', 'sequence_reverse', 'p'], ['s', 'sequence_reduce', {'fn': 'fold'}, 'r', 'z', 'w']]",
     "w", ANY, NULL},
    {"sequence_map of a mapped sequence", "{" SEQ_FNS "}", "{'xs': 'f64[2]*', 'w': 'f64[2]'}",
     "[['ys', 'sequence_map', {'fn': 'lin'}, 'xs', 'w'], ['qs', 'sequence_map', {'fn': 'sqs'}, 'ys'], "
     "['s', 'sequence_sum', 'qs']]",
     "w", ANY, NULL},
/* functions that take derivatives, differentiated (second derivatives) */
#define DERIV_FNS \
    "'inner': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': [['p', 'mul', 'w', 'x'], ['e', 'exp', 'p'], " \
    "['q', 'mul', 'e', 'w'], ['y', 'sum', 'q']], 'result': 'y'}, " \
    "'vec': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': [['p', 'mul', 'w', 'x'], ['y', 'tanh', 'p']], " \
    "'result': 'y'}, " \
    "'sq': {'params': {'v': 'f64[2]'}, 'body': [['q', 'mul', 'v', 'v'], ['y', 'sum', 'q']], 'result': 'y'}, " \
    "'cl': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': [['d', 'matmul', 'x', 'w'], ['t', 'tanh', 'd'], " \
    "['y', 'mul', 't', 't']], 'result': 'y'}, " \
    "'fl': {'params': {'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}, 'body': [['b', 'federated_broadcast', 'w'], " \
    "['l', 'federated_map', {'fn': 'cl'}, 'b', 'x'], ['s', 'federated_mean', 'l']], 'result': 's'}, " \
    "'fw': {'params': {'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS', 'n': '{f64[]}@CLIENTS'}, 'body': " \
    "[['b', 'federated_broadcast', 'w'], ['l', 'federated_map', {'fn': 'cl'}, 'b', 'x'], " \
    "['s', 'federated_weighted_mean', 'l', 'n']], 'result': 's'}, " \
    "'fa': {'params': {'v': 'f64[2]@CLIENTS', 'x': '{f64[2]}@CLIENTS'}, 'body': " \
    "[['l', 'federated_map', {'fn': 'cl'}, 'v', 'x'], ['s', 'federated_sum', 'l']], 'result': 's'}, " \
    "'ia': {'params': {'w': 'f64[2]', 'x': 'f64[2]'}, 'body': [['p', 'mul', 'w', 'x'], ['e', 'exp', 'p'], " \
    "['q', 'mul', 'e', 'w'], ['y', 'sum', 'q'], ['r', 'struct', {'names': ['value', 'aux']}, 'y', 'e']], " \
    "'result': 'r'}, " \
    "'fla': {'params': {'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}, 'body': [['b', 'federated_broadcast', 'w'], " \
    "['l', 'federated_map', {'fn': 'cl'}, 'b', 'x'], ['s', 'federated_mean', 'l'], ['t', 'federated_sum', 'l'], " \
    "['r', 'struct', {'names': ['value', 'aux']}, 's', 't']], 'result': 'r'}, " \
    "'sqa': {'params': {'v': 'f64[2]', 'a': 'f64[]'}, 'body': [['q', 'mul', 'v', 'v'], ['y', 'sum', 'q'], " \
    "['z', 'mul', 'y', 'a']], 'result': 'z'}, " \
    "'mulm': {'params': {'a': 'f64[]', 'b': 'f64[]'}, 'body': [['z', 'mul', 'a', 'b']], 'result': 'z'}"
    {"grad of a local function wrt w", "{" DERIV_FNS "}", "{'w': 'f64[2]', 'x': 'f64[2]'}",
     "[['g', 'grad', {'fn': 'inner'}, 'w', 'x'], ['q', 'mul', 'g', 'g'], ['s', 'sum', 'q']]", "w", ANY, NULL},
    {"grad of a local function wrt the other parameter", "{" DERIV_FNS "}", "{'w': 'f64[2]', 'x': 'f64[2]'}",
     "[['g', 'grad', {'fn': 'inner'}, 'w', 'x'], ['q', 'mul', 'g', 'g'], ['s', 'sum', 'q']]", "x", ANY, NULL},
    {"value_and_grad", "{" DERIV_FNS "}", "{'w': 'f64[2]', 'x': 'f64[2]'}",
     "[['vg', 'value_and_grad', {'fn': 'inner'}, 'w', 'x'], ['v', 'field', {'name': 'value'}, 'vg'], "
     "['g', 'field', {'name': 'grad'}, 'vg'], ['q', 'mul', 'g', 'g'], ['t', 'sum', 'q'], ['s', 'mul', 't', 'v']]",
     "w", ANY, NULL},
    /* has_aux: <value, aux> results; aux passes no gradient to the inner derivative, but the outer one
     * differentiates through it (s uses it) */
    {"value_and_grad with has_aux", "{" DERIV_FNS "}", "{'w': 'f64[2]', 'x': 'f64[2]'}",
     "[['vg', 'value_and_grad', {'fn': 'ia', 'has_aux': true}, 'w', 'x'], ['v', 'field', {'name': 'value'}, 'vg'], "
     "[['y', 'e'], 'fields', {'names': ['value', 'aux']}, 'v'], ['g', 'field', {'name': 'grad'}, 'vg'], ['q', 'mul', 'g', 'e'], ['t', 'sum', 'q'], "
     "['s', 'mul', 't', 'y']]",
     "w", ANY, NULL},
    {"grad with has_aux wrt the other parameter", "{" DERIV_FNS "}", "{'w': 'f64[2]', 'x': 'f64[2]'}",
     "[['ga', 'grad', {'fn': 'ia', 'wrt': 'x', 'has_aux': true}, 'w', 'x'], [['g', 'e'], 'fields', {'names': ['grad', 'aux']}, 'ga'], "
     "['q', 'mul', 'g', 'e'], ['s', 'sum', 'q']]",
     "x", ANY, NULL},
    {"vjp wrt the point", "{" DERIV_FNS "}", "{'w': 'f64[2]', 'x': 'f64[2]', 'c': 'f64[2]'}",
     "[['d', 'vjp', {'fn': 'vec'}, 'w', 'x', 'c'], ['q', 'mul', 'd', 'd'], ['s', 'sum', 'q']]", "w", ANY, NULL},
    {"vjp wrt the cotangent", "{" DERIV_FNS "}", "{'w': 'f64[2]', 'x': 'f64[2]', 'c': 'f64[2]'}",
     "[['d', 'vjp', {'fn': 'vec'}, 'w', 'x', 'c'], ['q', 'mul', 'd', 'd'], ['s', 'sum', 'q']]", "c", ANY, NULL},
    {"jvp wrt the point", "{" DERIV_FNS "}", "{'w': 'f64[2]', 'x': 'f64[2]', 't': 'f64[2]'}",
     "[['j', 'jvp', {'fn': 'vec'}, 'w', 'x', 't'], ['v', 'field', {'name': 'value'}, 'j'], "
     "['g', 'field', {'name': 'tangent'}, 'j'], ['q', 'mul', 'v', 'g'], ['s', 'sum', 'q']]",
     "w", ANY, NULL},
    {"jvp wrt the tangent", "{" DERIV_FNS "}", "{'w': 'f64[2]', 'x': 'f64[2]', 't': 'f64[2]'}",
     "[['j', 'jvp', {'fn': 'vec', 'wrt': 'x'}, 'w', 'x', 't'], ['g', 'field', {'name': 'tangent'}, 'j'], "
     "['q', 'mul', 'g', 'g'], ['s', 'sum', 'q']]",
     "t", ANY, NULL},
    {"grad of a federated mean wrt the server model", "{" DERIV_FNS "}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['g', 'grad', {'fn': 'fl'}, 'w', 'x'], ['s', 'federated_apply', {'fn': 'sq'}, 'g']]", "w", ANY, NULL},
    {"grad of a federated mean wrt client data", "{" DERIV_FNS "}", "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['g', 'grad', {'fn': 'fl'}, 'w', 'x'], ['s', 'federated_apply', {'fn': 'sq'}, 'g']]", "x", ANY, NULL},
    {"grad wrt client values of a federated mean", "{" DERIV_FNS "}", "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['g', 'grad', {'fn': 'fl', 'wrt': 'x'}, 'w', 'x'], ['m', 'federated_map', {'fn': 'sq'}, 'g'], "
     "['s', 'federated_sum', 'm']]",
     "w", ANY, NULL},
    {"grad with has_aux of a federated mean", "{" DERIV_FNS "}", "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['ga', 'grad', {'fn': 'fla', 'has_aux': true}, 'w', 'x'], [['g', 'a'], 'fields', {'names': ['grad', 'aux']}, 'ga'], "
     "['s', 'federated_apply', {'fn': 'sqa'}, 'g', 'a']]",
     "w", ANY, NULL},
    {"value_and_grad with has_aux of a federated mean wrt client data", "{" DERIV_FNS "}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['vg', 'value_and_grad', {'fn': 'fla', 'has_aux': true}, 'w', 'x'], [['v', 'g'], 'fields', {'names': ['value', 'grad']}, 'vg'], "
     "[['m', 'a'], 'fields', {'names': ['value', 'aux']}, 'v'], ['p', 'federated_apply', {'fn': 'sqa'}, 'g', 'a'], "
     "['s', 'federated_apply', {'fn': 'mulm'}, 'p', 'm']]",
     "x", ANY, NULL},
    {"grad of a federated weighted mean", "{" DERIV_FNS "}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS', 'n': '{f64[]}@CLIENTS'}",
     "[['g', 'grad', {'fn': 'fw'}, 'w', 'x', 'n'], ['s', 'federated_apply', {'fn': 'sq'}, 'g']]", "w", POS, NULL},
/* a small convolutional network, as programs/models/cnn_mnist.json in f64: its Hessian crosses conv2d's,
 * relu's, max_pool's and the cross-entropy's second derivatives */
#define CNN_FNS \
    "'logits': {'params': {'m': '<c=f64[3,3,1,2],cb=f64[2],d=f64[8,3],db=f64[3]>', 'x': 'f64[2,4,4,1]'}, 'body': " \
    "[['c', 'field', {'name': 'c'}, 'm'], ['cb', 'field', {'name': 'cb'}, 'm'], ['d', 'field', {'name': 'd'}, 'm'], " \
    "['db', 'field', {'name': 'db'}, 'm'], ['h', 'conv2d', 'x', 'c'], ['hb', 'add', 'h', 'cb'], ['a', 'relu', 'hb'], " \
    "['p', 'max_pool', {'window': [2, 2]}, 'a'], ['f', 'reshape', {'shape': [2, 8]}, 'p'], " \
    "['z', 'matmul', 'f', 'd'], ['y', 'add', 'z', 'db']], 'result': 'y'}"
    {"a small CNN (conv2d, relu, max_pool, dense, cross-entropy) wrt its weights", "{" CNN_FNS "}",
     "{'m': '<c=f64[3,3,1,2],cb=f64[2],d=f64[8,3],db=f64[3]>', 'x': 'f64[2,4,4,1]', 'l': 'i32[2]'}",
     "[['z', 'call', {'fn': 'logits'}, 'm', 'x'], ['e', 'softmax_cross_entropy', 'z', 'l'], ['s', 'sum', 'e']]", "m",
     ANY, "{'l': [2, 0]}"},
/* a meta-gradient: the gradient through SGD steps that take gradients (MAML's), over a sequence of
 * examples in a fori over epochs */
#define SGD_FNS \
    "'loss': {'params': {'w': 'f64[3]', 'e': 'f64[3]'}, 'body': [['z', 'matmul', 'e', 'w'], ['t', 'tanh', 'z'], " \
    "['q', 'mul', 't', 't']], 'result': 'q'}, " \
    "'sgd': {'params': {'w': 'f64[3]', 'e': 'f64[3]', 'lr': 'f64[]'}, 'body': [['g', 'grad', {'fn': 'loss'}, 'w', " \
    "'e'], ['s', 'mul', 'lr', 'g'], ['n', 'sub', 'w', 's']], 'result': 'n'}, " \
    "'epoch': {'params': {'i': 'i32[]', 'w': 'f64[3]', 'xs': 'f64[3]*', 'lr': 'f64[]'}, 'body': " \
    "[['n', 'sequence_reduce', {'fn': 'sgd'}, 'xs', 'w', 'lr']], 'result': 'n'}"
    {"a meta-gradient through SGD steps", "{" SGD_FNS "}",
     "{'w': 'f64[3]', 'xs': 'f64[3]*', 'lr': 'f64[]', 'e': 'f64[3]'}",
     "[['t', 'fori', {'fn': 'epoch', 'n': 2}, 'w', 'xs', 'lr'], ['s', 'call', {'fn': 'loss'}, 't', 'e']]", "w", ANY,
     "{'lr': 0.7}"},
    {"a meta-gradient wrt the learning rate", "{" SGD_FNS "}",
     "{'w': 'f64[3]', 'xs': 'f64[3]*', 'lr': 'f64[]', 'e': 'f64[3]'}",
     "[['t', 'fori', {'fn': 'epoch', 'n': 2}, 'w', 'xs', 'lr'], ['s', 'call', {'fn': 'loss'}, 't', 'e']]", "lr", POS,
     NULL},
    {"grad wrt an all-equal client value", "{" DERIV_FNS "}", "{'v': 'f64[2]@CLIENTS', 'x': '{f64[2]}@CLIENTS'}",
     "[['g', 'grad', {'fn': 'fa'}, 'v', 'x'], ['m', 'federated_map', {'fn': 'sq'}, 'g'], ['s', 'federated_sum', 'm']]",
     "v", ANY, NULL},
    {"federated_map_all_equal of a broadcast wrt the server value", "{" FED_FNS "}",
     "{'w': 'f64[2]@SERVER', 'x': '{f64[2]}@CLIENTS'}",
     "[['b', 'federated_broadcast', 'w'], ['t', 'federated_map_all_equal', {'fn': 'tnh'}, 'b'], "
     "['l', 'federated_map', {'fn': 'cl'}, 't', 'x'], ['s', 'federated_sum', 'l']]",
     "w", ANY, NULL},
    {"an all-equal T@CLIENTS parameter through federated_map_all_equal", "{" FED_FNS "}",
     "{'v': 'f64[2]@CLIENTS', 'x': '{f64[2]}@CLIENTS'}",
     "[['t', 'federated_map_all_equal', {'fn': 'tnh'}, 'v'], ['l', 'federated_map', {'fn': 'cl'}, 't', 'x'], "
     "['s', 'federated_mean', 'l']]",
     "v", ANY, NULL},
};

#endif
