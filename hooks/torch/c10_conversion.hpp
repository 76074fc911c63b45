// Conversions from fragless's stats and snapshot model to c10's (DeviceStats, SegmentInfo).
// Invariant: a figure has the same meaning on both sides (stats_fields.def follows PyTorch's
// DeviceStats), so the conversion copies field by field and invents nothing.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <vector>

#include "fragless/stats.hpp"
#include "fragless/stats_snapshot.hpp"

namespace fragless::torch {

c10::CachingDeviceAllocator::DeviceStats to_c10(const device_stats& stats);
// Segments of `snapshot` as c10 SegmentInfo (blocks in address order).
std::vector<c10::CachingDeviceAllocator::SegmentInfo> to_c10_segments(const memory_snapshot& snapshot);

}  // namespace fragless::torch
