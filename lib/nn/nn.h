// The nn layer in one include.
#pragma once
#include "nn/attention.h"
#include "nn/block.h"
#include "nn/config.h"
#include "nn/gpt.h"
#include "nn/kv_cache.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/mlp_model.h"
#include "nn/module.h"
#include "nn/rope.h"
