// The built-in schedules, each a schedule_generator (schedule.hpp) with its own parameter rules:
//   loop placement, full backward:   naive, gpipe, one_f_one_b, interleaved, looped_bfs
//   loop placement, split backward:  zb_h1, zb_h2, interleaved_zero_bubble
//   V placement:                     zb_v, dualpipe_v (with overlapped F&B pairs), v_min, v_half
//   two directions:                  dualpipe (mirrored stage copies, overlapped F&B pairs)
//   asynchronous (no flush):         pipedream, pipedream_2bw (async_schedule: async.hpp)
//   synthesised from costs:          synthesise (one stage a rank, a memory limit: synthesis.hpp)
// A user's schedule is any other type that meets the concept; nothing here needs to change for it.
#pragma once

#include <ctpipe/schedule/async.hpp>
#include <ctpipe/schedule/bidirectional.hpp>
#include <ctpipe/schedule/classic.hpp>
#include <ctpipe/schedule/synthesis.hpp>
#include <ctpipe/schedule/v_memory.hpp>
#include <ctpipe/schedule/v_shape.hpp>
#include <ctpipe/schedule/zero_bubble.hpp>
