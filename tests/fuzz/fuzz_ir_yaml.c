/* fuzz_ir_yaml.c - libFuzzer target: bytes as a YAML program through the loader, the checker and the
 * canonical writers (the target of fuzz_ir_json.c, for YAML input). */
#define FUZZ_IR_YAML 1
#include "fuzz_ir_json.c"
