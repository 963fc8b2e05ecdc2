// PipeTransformer's elastic freezing on host threads: the elastic plan (freeze points, pipeline
// lengths and replicas at compile time), the freezing policies, and the elastic trainer.
#pragma once

#include <ctpipe/elastic/plan.hpp>
#include <ctpipe/elastic/policy.hpp>
#include <ctpipe/elastic/trainer.hpp>
