/* NoPE: no position information; only a causal mask gives order. Every hook is NULL, so
 * the core runs plain attention. */
#include "../internal.h"

const pe__method pe__method_none = {
    .name = "none",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = "",
    .flags = PE__GQA | PE__FUSED,
};
