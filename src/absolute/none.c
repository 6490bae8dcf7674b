/* NoPE: no position information; only a causal mask gives order. Every hook is NULL, so
 * the core runs plain attention. */
#include "../internal.h"

const pe__method pe__method_none = {
    .name = "none",
    .reference = "NoPE: order only through the causal mask (Kazemnejad et al. 2023)",
    .family = PE_FAMILY_ABSOLUTE,
    .keys = "",
    .flags = PE__GQA | PE__FUSED,
};
