#include "phase_conv.h"

#include <algorithm>

#include "parallel.h"
#include "vector_lanes.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define LAZYLAB_PHASE_CONV 1
#endif

namespace lazylab::cpu {
namespace {

constexpr int64_t kFilters = 8;    // filters a task and a tile
constexpr int64_t kLanes = 16;     // floats a register
constexpr int64_t kRegisters = 3;  // registers of outputs a tile
// Registers of outputs a band: a task's eight filters over a band are 18
// KiB of results, which the epilogue then reads from L1.
constexpr int64_t kBandRegisters = 12 * kRegisters;
constexpr uint32_t kAllLanes = 0xFFFF;

#if defined(LAZYLAB_PHASE_CONV)
// One tile's sums: `Regs` registers of outputs, their taps read at `input`
// + each channel's planes + the tap's offset, times the eight filters'
// weights (filters[f][t], t the tap's number), broadcast. With MaskLast the
// last register reads only its `last` lanes (an image's last outputs in an
// input read as it lies, which ends there).
template <int Regs, bool MaskLast>
void sum_tile(const float* input, int64_t channels, int64_t channel_floats, const int64_t* window, int64_t window_size,
              const float* const* filters, __mmask16 last, __m512 (&sums)[kFilters][Regs]) {
  __m512 acc[kFilters][Regs];  // local, so that they stay in registers
  for (auto& row : acc)
    for (__m512& sum : row) sum = _mm512_setzero_ps();
  const float *f0 = filters[0], *f1 = filters[1], *f2 = filters[2], *f3 = filters[3];
  const float *f4 = filters[4], *f5 = filters[5], *f6 = filters[6], *f7 = filters[7];
  int64_t t = 0;
  for (int64_t c = 0; c < channels; ++c, input += channel_floats)
    for (int64_t k = 0; k < window_size; ++k, ++t) {
      const float* at = input + window[k];
      __m512 runs[Regs];
      for (int r = 0; r < Regs; ++r)
        runs[r] =
            MaskLast && r == Regs - 1 ? _mm512_maskz_loadu_ps(last, at + r * kLanes) : _mm512_loadu_ps(at + r * kLanes);
      const float weights[kFilters] = {f0[t], f1[t], f2[t], f3[t], f4[t], f5[t], f6[t], f7[t]};
      for (int f = 0; f < kFilters; ++f) {
        __m512 tap = _mm512_set1_ps(weights[f]);
        for (int r = 0; r < Regs; ++r) acc[f][r] = _mm512_fmadd_ps(tap, runs[r], acc[f][r]);
      }
    }
  for (int f = 0; f < kFilters; ++f)
    for (int r = 0; r < Regs; ++r) sums[f][r] = acc[f][r];
}

struct TileArgs {
  const float* input;
  int64_t channels, channel_floats;
  const int64_t* window;
  int64_t window_size;
  const float* const* filters;
  __mmask16 last;
  float* const* planes;  // each filter's output plane
  int64_t valid;         // filters of the eight that exist
  // A chunk of the channels: the sums of the chunks before it, in
  // registers' places, filter f's at partial + f * partial_floats (added
  // unless this is the first chunk; where it is not the last, the sums so
  // far go back there instead of to the planes).
  float* partial;
  int64_t partial_floats;
  bool first_chunk, last_chunk;
};

template <int Regs, bool MaskLast, class Store>
void tile(const TileArgs& a, const Store* stores) {
  __m512 sums[kFilters][Regs];
  sum_tile<Regs, MaskLast>(a.input, a.channels, a.channel_floats, a.window, a.window_size, a.filters, a.last, sums);
  if (!a.first_chunk)
    for (int f = 0; f < kFilters; ++f)
      for (int r = 0; r < Regs; ++r)
        sums[f][r] = _mm512_add_ps(sums[f][r], _mm512_loadu_ps(a.partial + f * a.partial_floats + r * kLanes));
  if (!a.last_chunk) {
    for (int f = 0; f < kFilters; ++f)
      for (int r = 0; r < Regs; ++r) _mm512_storeu_ps(a.partial + f * a.partial_floats + r * kLanes, sums[f][r]);
    return;
  }
  // Constant indices only (the loops unroll): a sum indexed by `valid`
  // would keep the array, and every multiply-add's result, in memory.
  for (int f = 0; f < kFilters; ++f)
    if (f < a.valid)
      for (int r = 0; r < Regs; ++r) {
        float* to = a.planes[f] + stores[r].at;
        if (stores[r].lanes == kAllLanes)
          _mm512_storeu_ps(to, sums[f][r]);
        else if (stores[r].lanes)
          _mm512_mask_compressstoreu_ps(to, static_cast<__mmask16>(stores[r].lanes), sums[f][r]);
      }
}
#endif

}  // namespace

bool PhaseConv::takes(const DirectShape& shape) {
#if defined(LAZYLAB_PHASE_CONV)
  return shape.out_h > 0 && shape.out_w > 0 && shape.channels > 0 && shape.filters > 0 && shape.images > 0;
#else
  (void)shape;
  return false;
#endif
}

PhaseConv::PhaseConv(const DirectShape& shape)
    : s_(shape), planes_(shape), taps_(shape.channels * shape.kernel_h * shape.kernel_w) {
  registers_ = ceil_div(s_.out_h * planes_.width(), kLanes);
  chunk_channels_ = chunk_channels();
  // Each register's kept lanes, in order, continue the one before's in
  // the output plane: the dropped lanes are the columns past an output
  // row's end, so a register's kept lanes (a row's last outputs and the
  // next row's first) lie side by side there.
  int64_t next = 0;
  for (int64_t g = 0; g < registers_; ++g) {
    Store store{next, 0, next};
    for (int64_t lane = 0; lane < kLanes; ++lane) {
      int64_t at = g * kLanes + lane, y = at / planes_.width(), x = at % planes_.width();
      if (y >= s_.out_h || x >= s_.out_w) continue;
      store.lanes |= uint32_t{1} << lane;
      store.end = y * s_.out_w + x + 1;
    }
    next = store.end;
    stores_.push_back(store);
  }
  // Past the last channel, what the last registers' dropped lanes read.
  if (!reads_input_as_it_lies())
    phases_.assign(static_cast<size_t>(s_.images * s_.channels * planes_.channel_floats() + planes_.farthest() +
                                       registers_ * kLanes),
                   0.0f);
}

// Consecutive tiles of a band read mostly the same lines of a channel's
// planes, which stay in L1 between them only where the band's channels are
// taken a chunk at a time: as many as read some 24 KiB a tile. Planes
// narrower than half a tile (layer3's and layer4's 14x14 and 7x7) measured
// slower in chunks (their tiles cover whole planes: ms on this 2-core
// Xeon, ResNet-18's 3x3 convolutions, whole against chunks of 16: 56x56
// 0.788 / 0.752, 28x28 0.826 / 0.742, 28x28 at stride 2 0.576 / 0.464;
// 14x14 0.707 / 0.769, 7x7 0.801 / 0.910).
int64_t PhaseConv::chunk_channels() const {
  constexpr int64_t kTileOutputs = kRegisters * kLanes, kChunkBytes = 24 << 10, kLeast = 8;
  const int64_t width = planes_.width();
  if (width * 2 < kTileOutputs) return s_.channels;
  const int64_t rows = ceil_div(kTileOutputs, width) + 1 + (s_.kernel_h - 1) * s_.dilation[0] / s_.stride[0];
  const int64_t bytes = planes_.channel_floats() / planes_.plane() * std::min(rows, planes_.height()) * width * 4;
  return std::clamp<int64_t>(kChunkBytes / bytes, std::min(kLeast, s_.channels), s_.channels);
}

bool PhaseConv::reads_input_as_it_lies() const {
  return s_.kernel_h == 1 && s_.kernel_w == 1 && s_.stride[0] == 1 && s_.stride[1] == 1 && s_.pad_top == 0 &&
         s_.pad_left == 0 && s_.pad_bottom == 0 && s_.pad_right == 0;
}

void PhaseConv::deal_phases(const float* x, tbb::task_arena* arena) {
  each_in_parallel(arena, s_.images * s_.channels, [&](int64_t first, int64_t end) {
    for (int64_t at = first; at < end; ++at)
      planes_.deal(x + at * s_.height * s_.width, phases_.data() + at * planes_.channel_floats());
  });
}

void PhaseConv::run(const float* x, const float* w, float* out, tbb::task_arena* arena) {
  run(x, w, out, arena, BlockDone{});
}

void PhaseConv::run(const float* x, const float* w, float* out, tbb::task_arena* arena, const BlockDone& block_done) {
  const float* input = x;
  if (!reads_input_as_it_lies()) {
    deal_phases(x, arena);
    input = phases_.data();
  }
  // A task a band of an image's eight filters: enough of them that the
  // threads share them out evenly (layer1's 64 filters were 8 tasks).
  const int64_t blocks = ceil_div(s_.filters, kFilters), bands = ceil_div(registers_, kBandRegisters);
  each_in_parallel(arena, s_.images * blocks * bands, [&](int64_t first, int64_t end) {
    for (int64_t task = first; task < end; ++task)
      run_task(input, w, out, task / (blocks * bands), task / bands % blocks, task % bands, block_done);
  });
}

void PhaseConv::run_task(const float* input, const float* w, float* out, int64_t image, int64_t block,
                         int64_t band_index, const BlockDone& block_done) const {
#if defined(LAZYLAB_PHASE_CONV)
  const int64_t positions = s_.out_h * s_.out_w, first_filter = block * kFilters;
  const int64_t valid = std::min(kFilters, s_.filters - first_filter);
  const float* filters[kFilters];
  float* planes[kFilters];
  for (int64_t f = 0; f < kFilters; ++f) {
    int64_t filter = std::min(first_filter + f, s_.filters - 1);  // past the last: read the last, stored nowhere
    filters[f] = w + filter * taps_;
    planes[f] = out + (image * s_.filters + filter) * positions;
  }
  TileArgs args{input + image * s_.channels * planes_.channel_floats(),
                s_.channels,
                planes_.channel_floats(),
                planes_.window().data(),
                static_cast<int64_t>(planes_.window().size()),
                filters,
                0,
                planes,
                valid,
                nullptr,
                kBandRegisters * kLanes,
                true,
                true};
  // An input read as it lies ends at an image's last output: its last
  // register reads only what is there.
  const int64_t tail = s_.out_h * planes_.width() % kLanes;
  const bool mask_tail = reads_input_as_it_lies() && tail != 0;
  args.last = first_lanes(tail);
  float* partial = nullptr;
  if (chunk_channels_ < s_.channels) {
    std::vector<float>& mine = partials_.local();
    mine.resize(static_cast<size_t>(kFilters * kBandRegisters * kLanes));
    partial = mine.data();
  }
  const float* chunk_filters[kFilters];
  {
    const int64_t band = band_index * kBandRegisters, band_end = std::min(registers_, band + kBandRegisters);
    for (int64_t c0 = 0; c0 < s_.channels; c0 += chunk_channels_) {
      TileArgs chunk = args;
      chunk.input += c0 * planes_.channel_floats();
      chunk.channels = std::min(chunk_channels_, s_.channels - c0);
      for (int64_t f = 0; f < kFilters; ++f) chunk_filters[f] = filters[f] + c0 * chunk.window_size;
      chunk.filters = chunk_filters;
      chunk.first_chunk = c0 == 0;
      chunk.last_chunk = c0 + chunk.channels == s_.channels;
      for (int64_t g = band; g < band_end; g += kRegisters) {
        const Store* stores = stores_.data() + g;
        TileArgs at = chunk;
        at.input += g * kLanes;
        at.partial = partial + (g - band) * kLanes;
        const int64_t regs = std::min(kRegisters, band_end - g);
        const bool masked = mask_tail && g + regs == registers_;
        if (regs == 3)
          masked ? tile<3, true>(at, stores) : tile<3, false>(at, stores);
        else if (regs == 2)
          masked ? tile<2, true>(at, stores) : tile<2, false>(at, stores);
        else
          masked ? tile<1, true>(at, stores) : tile<1, false>(at, stores);
      }
    }
    if (block_done) {
      const int64_t row = image * s_.filters + first_filter;
      block_done(row, row + valid, stores_[band].at, stores_[band_end - 1].end);
    }
  }
#else
  (void)input, (void)w, (void)out, (void)image, (void)block, (void)band_index, (void)block_done;
#endif
}

}  // namespace lazylab::cpu
