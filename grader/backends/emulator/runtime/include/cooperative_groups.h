/* scangrade CPU emulator: the part of CUDA's cooperative groups that works within a block, built on
   the prelude's warp primitives (docs/emulator.md, "Warp-level primitives"): this_thread_block(),
   tiled_partition (static sizes 1-32 as thread_block_tile<N>, dynamic ones as thread_group),
   coalesced_threads(), and their sync / shfl / shfl_up / shfl_down / shfl_xor / ballot / any / all /
   thread_rank / size / meta_group_rank / meta_group_size. Grid and multi-grid groups, tiles larger
   than a warp, labeled_partition, binary_partition and cooperative_groups/reduce.h, scan.h,
   memcpy_async.h are not emulated: using them is a compile error. Every member function passes its
   caller's file and line on (__SG_SITE), so findings name the student's line. It calls only the
   prelude's public functions: the runtime's own names are poisoned for the student's file. */
#ifndef _COOPERATIVE_GROUPS_H_
#define _COOPERATIVE_GROUPS_H_

namespace cooperative_groups {
namespace __sg_cg {
inline unsigned linear_rank() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
inline unsigned lane() { return linear_rank() & 31u; }
/* The lane of the warp holding the r-th set bit of mask m (r counted from 0), or 32. */
inline int nth_lane(unsigned m, unsigned r) {
    for (int l = 0; l < 32; ++l)
        if ((m >> l & 1u) && r-- == 0) return l;
    return 32;
}
/* The bits of `bits` at the set positions of m, packed from bit 0 (PTX's pext). */
inline unsigned packed(unsigned bits, unsigned m) {
    unsigned out = 0, k = 0;
    for (int l = 0; l < 32; ++l)
        if (m >> l & 1u) out |= (bits >> l & 1u) << k++;
    return out;
}
}  // namespace __sg_cg

class thread_block {
  public:
    void sync(__SG_SITE) const { __syncthreads(__sg_f, __sg_l); }
    unsigned long long thread_rank() const { return __sg_cg::linear_rank(); }
    unsigned long long size() const { return (unsigned long long)blockDim.x * blockDim.y * blockDim.z; }
    unsigned long long num_threads() const { return size(); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 dim_threads() const { return dim3(blockDim.x, blockDim.y, blockDim.z); }
    dim3 group_dim() const { return dim_threads(); }
};
inline thread_block this_thread_block() { return thread_block(); }

/* A group of lanes of one warp: `mask_` its lanes, the caller's rank among them. */
class thread_group {
  public:
    explicit thread_group(unsigned mask, unsigned size, unsigned rank) : mask_(mask), size_(size), rank_(rank) {}
    void sync(__SG_SITE) const { __syncwarp(mask_, __sg_f, __sg_l); }
    unsigned long long thread_rank() const { return rank_; }
    unsigned long long size() const { return size_; }
    unsigned long long num_threads() const { return size_; }

  protected:
    unsigned mask_, size_, rank_;
};

/* A tile of N lanes (a power of two, 1 to 32) of one warp. */
template <unsigned N>
class thread_block_tile : public thread_group {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0,
                  "not supported by the emulator: a thread_block_tile whose size is not a power of two up to 32");

  public:
    thread_block_tile()
        : thread_group(N == 32 ? 0xffffffffu : ((1u << N) - 1) << (__sg_cg::lane() & ~(N - 1)), N,
                       __sg_cg::linear_rank() & (N - 1)) {}
    template <class T>
    T shfl(T v, int src, __SG_SITE) const { return __shfl_sync(mask_, v, src, N, __sg_f, __sg_l); }
    template <class T>
    T shfl_up(T v, unsigned d, __SG_SITE) const { return __shfl_up_sync(mask_, v, d, N, __sg_f, __sg_l); }
    template <class T>
    T shfl_down(T v, unsigned d, __SG_SITE) const { return __shfl_down_sync(mask_, v, d, N, __sg_f, __sg_l); }
    template <class T>
    T shfl_xor(T v, unsigned m, __SG_SITE) const { return __shfl_xor_sync(mask_, v, (int)m, N, __sg_f, __sg_l); }
    /* Bit r for the tile's rank r (measured on an H100: tile-relative bits). */
    unsigned ballot(int p, __SG_SITE) const {
        return __ballot_sync(mask_, p, __sg_f, __sg_l) >> (__sg_cg::lane() & ~(N - 1));
    }
    int any(int p, __SG_SITE) const { return __any_sync(mask_, p, __sg_f, __sg_l); }
    int all(int p, __SG_SITE) const { return __all_sync(mask_, p, __sg_f, __sg_l); }
    template <class T>
    unsigned match_any(T v, __SG_SITE) const {
        return __match_any_sync(mask_, v, __sg_f, __sg_l) >> (__sg_cg::lane() & ~(N - 1));
    }
    unsigned long long meta_group_rank() const { return __sg_cg::linear_rank() / N; }
    unsigned long long meta_group_size() const {
        return ((unsigned long long)blockDim.x * blockDim.y * blockDim.z + N - 1) / N;
    }
};

template <unsigned N, class Parent>
inline thread_block_tile<N> tiled_partition(const Parent &) {
    return thread_block_tile<N>();
}

/* tiled_partition(parent, n) with n known only at run time: a power of two up to 32. */
inline thread_group tiled_partition(const thread_block &, unsigned n, __SG_SITE) {
    if (n < 1 || n > 32 || (n & (n - 1)))
        __SG_UNSUPPORTED("tiled_partition(block, n) with n not a power of two up to 32", __sg_f, __sg_l);
    unsigned m = n == 32 ? 0xffffffffu : ((1u << n) - 1) << (__sg_cg::lane() & ~(n - 1));
    return thread_group(m, n, __sg_cg::linear_rank() & (n - 1));
}

/* The lanes of the warp that execute the call together (__activemask(): the rewrite places the call
   as it places __activemask()'s); ranks in lane order. */
class coalesced_group : public thread_group {
  public:
    explicit coalesced_group(unsigned m)
        : thread_group(m, (unsigned)__popc(m), (unsigned)__popc(m & ((1u << __sg_cg::lane()) - 1))) {}
    template <class T>
    T shfl(T v, unsigned rank, __SG_SITE) const {
        return __shfl_sync(mask_, v, __sg_cg::nth_lane(mask_, rank % size_), 32, __sg_f, __sg_l);
    }
    template <class T>
    T shfl_up(T v, unsigned d, __SG_SITE) const {
        int src = rank_ >= d ? __sg_cg::nth_lane(mask_, rank_ - d) : (int)__sg_cg::lane();
        return __shfl_sync(mask_, v, src, 32, __sg_f, __sg_l);
    }
    template <class T>
    T shfl_down(T v, unsigned d, __SG_SITE) const {
        int src = rank_ + d < size_ ? __sg_cg::nth_lane(mask_, rank_ + d) : (int)__sg_cg::lane();
        return __shfl_sync(mask_, v, src, 32, __sg_f, __sg_l);
    }
    /* Bit r for the group's rank r. */
    unsigned ballot(int p, __SG_SITE) const {
        return __sg_cg::packed(__ballot_sync(mask_, p, __sg_f, __sg_l), mask_);
    }
    int any(int p, __SG_SITE) const { return __any_sync(mask_, p, __sg_f, __sg_l); }
    int all(int p, __SG_SITE) const { return __all_sync(mask_, p, __sg_f, __sg_l); }
    unsigned long long meta_group_rank() const { return 0; }
    unsigned long long meta_group_size() const { return 1; }
};

inline coalesced_group coalesced_threads(int __sg_o = -1, int __sg_a = -1, int __sg_b = -1, int __sg_lp = 0,
                                         __SG_SITE) {
    return coalesced_group(__activemask(__sg_o, __sg_a, __sg_b, __sg_lp, __sg_f, __sg_l));
}

template <class Group>
inline void sync(const Group &g, __SG_SITE) { g.sync(__sg_f, __sg_l); }
}  // namespace cooperative_groups

#endif
