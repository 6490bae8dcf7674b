/* The end of one pass of kernels.c: undoes simd.h's names and its target. */
#undef SHUF
#undef VEC
#undef MRN
#undef NV
#undef MRR
#undef SWAP
#undef vf
#undef vi
#undef vld
#undef vst
#undef vbc
#undef fmadd
#undef vmax
#undef vexp
#undef hsum_tree
#undef hmax
#undef mm_nt
#undef mm_acc
#undef mm_nt_tile
#undef mm_acc_queries
#undef mm_acc_keys
#undef mask_tile
#undef tile_skipped
#undef online_softmax
#undef pack_rows
#if PE_KPASS != 1
#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
