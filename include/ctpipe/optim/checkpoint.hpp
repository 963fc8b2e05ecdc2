// Checkpoints: a model's parameters, its optimizer's state and the training's position, in one
// safetensors file (format/safetensors.hpp) whose layout depends on the model alone, not on how
// it is partitioned, so that a checkpoint written by 4 pipeline ranks loads into 2, or into the
// sequential model; and numpy (tools/safetensors.py) or Hugging Face's safetensors reads it.
//
//   ctpipe::save_checkpoint("run.safetensors", opt, {exec.context_origin(), "epoch 3, batch 120"});
//   const ctpipe::training_state s = ctpipe::load_checkpoint("run.safetensors", opt);
//   exec.set_context_origin(s.origin);   // the random streams go on where they stood
//
// The tensors: "layers.<K>.<name>" for each parameter tensor of layer K (optim/../model/
// parameter_tensors.hpp), then "optimizer.layers.<K>.<name>.<state>" for each of the rule's state
// tensors. A shared group's later members leave out the tensors they share (the group's first
// layer holds them; loading gives every member the copy). The metadata: the update counts (the
// learning-rate schedule's position), the executor's step origin (the random streams' position),
// the rule's state names, and the user's text.
//
// A model of device layers is read and written through the optimizer's host copies of its held
// layers (copied from the devices before a save, to them after a load has checked everything).
//
// Through an optimizer made with an executor's place (the MPI or NCCL executor, the MPI device
// path), both calls are collective: every process computes the one layout; process 0 writes the
// header; each process writes the tensors of the layers it counts (each tensor once); each process
// reads the tensors of the layers it holds. Saving writes `<file>.tmp` and renames it over `<file>` only when every
// process has written and synced its part: a save interrupted half-way leaves the last good
// checkpoint as it was. Loading reads and checks everything into memory of its own first, on every
// process, and changes the model and the optimizer only when every process found its part whole: a
// damaged, truncated or mismatched file is a checkpoint_error naming the file and what does not
// match, and loads nothing anywhere. Every file carries a checksum per tensor and one over its
// header (optim/checkpoint_file.hpp), which every load checks: a file without them loads only with
// ctpipe::checksums::optional.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ctpipe/format/safetensors.hpp>
#include <ctpipe/model/context.hpp>          // step_origin
#include <ctpipe/optim/checkpoint_file.hpp>  // checkpoint_error, checksums, the file's bytes
#include <ctpipe/optim/optimizer.hpp>

namespace ctpipe {

static_assert(std::endian::native == std::endian::little,
              "ctpipe checkpoints: safetensors stores little-endian bytes, and this machine is not little-endian");

/// What a checkpoint keeps besides the tensors: where the executor's steps stand (the next step's
/// number and first microbatch: the layers' random streams are keyed by them), and the user's
/// text (where the data stands). The optimizer's update counts travel with the optimizer.
struct training_state {
  step_origin origin{};
  std::string data;
};

namespace detail {

// The optimizer's insides that a checkpoint reads and restores.
struct optimizer_access {
  template <class O>
  static auto& model(O& o) {
    return o.model_;
  }
  template <std::size_t K, class O>
  static auto& layer(O& o) {
    return std::get<K>(o.states_);
  }
  template <class O>
  static bool counts(const O& o, std::size_t k) {
    return o.counts(k);
  }
  template <class O>
  static bool leads(const O& o) {
    return o.leads_;
  }
  template <class O>
  static void sum(O& o, std::span<double> v) {
    if (o.place_ != nullptr) o.place_sum_(o.place_, v);
  }
  template <class O>
  static void set_updates(O& o, std::uint64_t n) {
    o.updates_ = n;
  }
  // Where a checkpoint reads and writes a held layer's parameters: the layer's own, or (a device
  // model) the optimizer's host copies, which parameters_to_host fills and parameters_to_device
  // copies back.
  template <class O, class L, class St>
  static auto parameters(L& l, St& st) {
    return O::parameters_of(l, st);
  }
  template <class O>
  static void parameters_to_host(O& o) {
    o.stage_in(true, false);
  }
  template <class O>
  static void parameters_to_device(O& o) {
    o.stage_out(true, false);
  }
};

// One tensor of a checkpoint, and where its values are in this process.
struct checkpoint_tensor {
  safetensors::entry e;
  std::size_t layer = 0;
  bool mine = false;               // this process writes it (it counts the layer)
  bool held = false;               // this process reads it (it holds the layer)
  std::byte* at = nullptr;         // where its values are here (held: parameters or state)
  std::vector<std::byte*> copies;  // later members' shared copies of it (held by this process)
  std::size_t states = 0;          // (a parameter tensor: the index of its first state tensor)
};

inline std::string describe_shape(const safetensors::entry& e) {
  std::string s = e.dtype + " [";
  for (std::size_t i = 0; i < e.shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(e.shape[i]);
  }
  return s + "]";
}

// The layout of opt's checkpoint (State: with the optimizer's tensors), in file order, with this
// process's pointers. Throws checkpoint_error where a later member's tensor is partly shared.
template <bool State, class O>
std::vector<checkpoint_tensor> checkpoint_layout(O& opt, const std::string& file) {
  using Model = typename O::model_type;
  using Rule = typename O::rule_type;
  auto& model = optimizer_access::model(opt);
  std::vector<checkpoint_tensor> params, states;
  // For each group's first layer, the tensor indices (in params) of what it shares, in order.
  std::vector<std::vector<std::size_t>> firsts(Model::size);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          auto& st = optimizer_access::layer<K>(opt);
          if constexpr (std::remove_cvref_t<decltype(st)>::updates) {
            using V = typename std::remove_cvref_t<decltype(st)>::value_type;
            auto& l = model.template layer<K>();
            const bool held = st.held;
            const bool mine = held && optimizer_access::counts(opt, K);
            std::byte* const w =
                held ? reinterpret_cast<std::byte*>(optimizer_access::parameters<O>(l, st).data()) : nullptr;
            const std::vector<tensor_slice> ts = tensor_slices(l, K);
            // A later member: where its shared span starts, in its parameters.
            std::size_t skip_from = 0, skip_to = 0;
            int first = -1;
            if constexpr (has_shared_parameters_v<Model>) {
              if (Model::shares[K] >= 0) {
                first = Model::shares[K];
                const auto all = l.parameters();
                const auto shared = shared_span_of<false>(l);
                skip_from = static_cast<std::size_t>(shared.data() - all.data());
                skip_to = skip_from + shared.size();
              }
            }
            std::size_t shared_index = 0;
            for (const tensor_slice& t : ts) {
              const std::size_t from = t.offset, to = t.offset + t.size();
              const bool inside = first >= 0 && from >= skip_from && to <= skip_to;
              if (first >= 0 && !inside && from < skip_to && to > skip_from)
                throw checkpoint_error("ctpipe checkpoint " + file + ": layer " + std::to_string(K) + "'s tensor \"" +
                                       std::string(t.tensor.name) + "\" is partly shared with layer " +
                                       std::to_string(first) +
                                       ": name its shared part as a tensor of its own (parameter_tensors)");
              auto* values = w == nullptr ? nullptr : w + t.offset * sizeof(V);
              if (inside) {
                // Stored once, at the group's first layer: this copy reads it, and its state.
                auto& of_first = firsts[static_cast<std::size_t>(first)];
                if (shared_index >= of_first.size() || params[of_first[shared_index]].e.end != t.size() * sizeof(V))
                  throw checkpoint_error("ctpipe checkpoint " + file + ": layer " + std::to_string(K) +
                                         "'s shared tensors do not match layer " + std::to_string(first) +
                                         "'s, tensor by tensor");
                checkpoint_tensor& c = params[of_first[shared_index++]];
                if (held) c.copies.push_back(values);
                c.held = c.held || held;
                if constexpr (State) {
                  for (std::size_t j = 0; j < Rule::state_names.size(); ++j) {
                    checkpoint_tensor& sc = states[c.states + j];
                    if (held)
                      sc.copies.push_back(reinterpret_cast<std::byte*>(st.state.data() + j * st.size + t.offset));
                    sc.held = sc.held || held;
                  }
                }
                continue;
              }
              checkpoint_tensor c;
              c.layer = K;
              c.mine = mine;
              c.held = held;
              c.at = values;
              c.e.name = "layers." + std::to_string(K) + "." + std::string(t.tensor.name);
              c.e.dtype = std::string(safetensors::dtype_of<V>());
              for (std::size_t d = 0; d < t.tensor.dims; ++d) c.e.shape.push_back(t.tensor.shape[d]);
              c.e.end = t.size() * sizeof(V);  // (a length for now; offsets come last)
              if (detail::group_first<Model>(static_cast<int>(K))) {
                // What this first layer shares: its parameters() or its shared_parameters().
                const auto shared = shared_span_of<false>(l);
                const auto begin = static_cast<std::size_t>(shared.data() - l.parameters().data());
                if (t.offset >= begin && t.offset + t.size() <= begin + shared.size())
                  firsts[K].push_back(params.size());
              }
              c.states = states.size();
              params.push_back(c);
              if constexpr (State) {
                for (std::size_t j = 0; j < Rule::state_names.size(); ++j) {
                  checkpoint_tensor s = c;
                  s.e.name += '.';
                  s.e.name += Rule::state_names[j];
                  s.at = held ? reinterpret_cast<std::byte*>(st.state.data() + j * st.size + t.offset) : nullptr;
                  states.push_back(s);
                }
              }
            }
          }
        }(),
        ...);
  }
  (std::make_index_sequence<Model::size>{});
  for (auto& s : states) {
    s.e.name = "optimizer." + s.e.name;
    params.push_back(std::move(s));
  }
  std::uint64_t at = 0;
  for (checkpoint_tensor& c : params) {
    const std::uint64_t n = c.e.end;
    c.e.begin = at;
    c.e.end = at + n;
    at += n;
  }
  return params;
}

// Collective: every layer's update count, from the process that counts it (a sum in which each
// count is the one term that is not 0: exact below 2^53).
template <class O>
std::vector<std::uint64_t> layer_updates_everywhere(O& opt) {
  using Model = typename O::model_type;
  std::vector<double> n(Model::size, 0.0);
  for (std::size_t k = 0; k < Model::size; ++k)
    if (opt.holds(k) && optimizer_access::counts(opt, k)) n[k] = static_cast<double>(opt.layer_updates(k));
  optimizer_access::sum(opt, n);
  std::vector<std::uint64_t> out(Model::size);
  for (std::size_t k = 0; k < Model::size; ++k) out[k] = static_cast<std::uint64_t>(n[k]);
  return out;
}

template <class O>
std::map<std::string, std::string> checkpoint_metadata(O& opt, const training_state& s,
                                                       const std::vector<std::uint64_t>& layer_updates) {
  using Model = typename O::model_type;
  using Rule = typename O::rule_type;
  std::map<std::string, std::string> m;
  m["format"] = "pt";            // what safetensors' PyTorch loader looks for; the tensors are plain
  m["ctpipe.checkpoint"] = "2";  // 2: with checksums (optim/checkpoint_file.hpp)
  m["ctpipe.updates"] = std::to_string(opt.updates());
  std::string per;
  for (std::size_t k = 0; k < Model::size; ++k) {
    if (k) per += ',';
    per += std::to_string(layer_updates[k]);
  }
  m["ctpipe.layer_updates"] = per;
  std::string names;
  for (std::size_t j = 0; j < Rule::state_names.size(); ++j) {
    if (j) names += ',';
    names += Rule::state_names[j];
  }
  m["ctpipe.optimizer_state"] = names;
  m["ctpipe.step"] = std::to_string(s.origin.step);
  if (s.origin.first_microbatch < 0)
    throw checkpoint_error("ctpipe checkpoint: the step origin's first microbatch (" +
                           std::to_string(s.origin.first_microbatch) + ") is negative");
  m["ctpipe.first_microbatch"] = std::to_string(s.origin.first_microbatch);
  m["ctpipe.data"] = s.data;
  return m;
}

// Every process's failure count (a collective sum where the optimizer spans processes).
template <class O>
int failures_everywhere(O& opt, bool failed_here) {
  double v = failed_here ? 1.0 : 0.0;
  optimizer_access::sum(opt, std::span<double>(&v, 1));
  return static_cast<int>(v);
}

inline std::uint64_t metadata_number(const safetensors::header& h, const std::string& key, const std::string& file) {
  const auto it = h.metadata.find(key);
  if (it == h.metadata.end())
    throw checkpoint_error("ctpipe checkpoint " + file + ": no \"" + key +
                           "\" in its metadata (not a ctpipe checkpoint)");
  std::uint64_t v = 0;
  const std::string& s = it->second;
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
    throw checkpoint_error("ctpipe checkpoint " + file + ": metadata \"" + key + "\" is \"" + s + "\", not a count");
  for (const char c : s) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  return v;
}

// The metadata's per-layer update counts: one count per layer of the model, separated by commas.
inline std::vector<std::uint64_t> layer_counts(const safetensors::header& h, std::size_t layers,
                                               const std::string& file) {
  const auto it = h.metadata.find("ctpipe.layer_updates");
  if (it == h.metadata.end())
    throw checkpoint_error("ctpipe checkpoint " + file + ": no \"ctpipe.layer_updates\" in its metadata");
  std::vector<std::uint64_t> per;
  std::string digits;
  for (const char c : it->second + ",") {
    if (c != ',') {
      if (c < '0' || c > '9' || digits.size() >= 19)
        throw checkpoint_error("ctpipe checkpoint " + file +
                               ": metadata \"ctpipe.layer_updates\" is not a list of counts");
      digits += c;
      continue;
    }
    if (digits.empty())
      throw checkpoint_error("ctpipe checkpoint " + file +
                             ": metadata \"ctpipe.layer_updates\" is not a list of counts");
    per.push_back(std::stoull(digits));
    digits.clear();
  }
  if (per.size() != layers)
    throw checkpoint_error("ctpipe checkpoint " + file + ": metadata \"ctpipe.layer_updates\" has " +
                           std::to_string(per.size()) + " counts, and this model " + std::to_string(layers) +
                           " layers");
  return per;
}

// Loads `layout` from `file` into memory of its own, checks it against the file, and (when every
// process succeeded) copies it in. Parameters only: the optimizer's tensors in the file are skipped.
template <bool State, class O>
safetensors::header load_into(const std::string& file, O& opt, checksums mode) {
  std::vector<checkpoint_tensor> layout;
  safetensors::header h;
  std::vector<std::vector<std::byte>> staged;
  std::string failure;
  try {
    layout = checkpoint_layout<State>(opt, file);
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw checkpoint_error("ctpipe checkpoint " + file + ": cannot open it: " + errno_text());
    struct closer {
      int fd;
      ~closer() { ::close(fd); }
    } c{fd};
    const file_header f = read_file_header(fd, file, mode);
    h = f.h;
    std::map<std::string, const safetensors::entry*> in_file;
    for (const safetensors::entry& e : h.tensors) in_file.emplace(e.name, &e);
    for (const checkpoint_tensor& t : layout) {
      const auto it = in_file.find(t.e.name);
      if (it == in_file.end())
        throw checkpoint_error("ctpipe checkpoint " + file + ": tensor \"" + t.e.name + "\" (" + describe_shape(t.e) +
                               ") is not in the file: a checkpoint of another model" +
                               (t.e.name.starts_with("optimizer.") ? " or another optimizer rule" : ""));
      const safetensors::entry& e = *it->second;
      if (e.dtype != t.e.dtype || e.shape != t.e.shape)
        throw checkpoint_error("ctpipe checkpoint " + file + ": tensor \"" + t.e.name + "\" is " + describe_shape(e) +
                               " in the file and " + describe_shape(t.e) + " in this model");
    }
    std::map<std::string, bool> expected;
    for (const checkpoint_tensor& t : layout) expected.emplace(t.e.name, true);
    for (const safetensors::entry& e : h.tensors)
      if (!expected.contains(e.name) && (State || !e.name.starts_with("optimizer.")))
        throw checkpoint_error("ctpipe checkpoint " + file + ": the file holds tensor \"" + e.name +
                               "\", which this model" + (State ? " and optimizer do" : " does") +
                               " not have: a checkpoint of another model");
    staged.resize(layout.size());
    for (std::size_t i = 0; i < layout.size(); ++i) {
      const checkpoint_tensor& t = layout[i];
      if (!t.held) continue;
      const safetensors::entry& e = *in_file.at(t.e.name);
      staged[i].resize(static_cast<std::size_t>(e.end - e.begin));
      std::string why;
      if (!read_at(fd, staged[i].data(), staged[i].size(), f.data_start + e.begin, why))
        throw checkpoint_error("ctpipe checkpoint " + file + ": tensor \"" + t.e.name + "\": " + why);
      check_tensor(f, file, t.e.name, staged[i]);
    }
    if constexpr (State) {
      (void)metadata_number(h, "ctpipe.updates", file);
      (void)metadata_number(h, "ctpipe.step", file);
      if (metadata_number(h, "ctpipe.first_microbatch", file) > static_cast<std::uint64_t>(INT32_MAX))
        throw checkpoint_error("ctpipe checkpoint " + file + ": metadata \"ctpipe.first_microbatch\" is too large");
      (void)layer_counts(h, O::model_type::size, file);
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const int failed = failures_everywhere(opt, !failure.empty());
  if (!failure.empty()) throw checkpoint_error(failure);
  if (failed > 0)
    throw checkpoint_error("ctpipe checkpoint " + file +
                           ": another process could not load its part (its error says "
                           "why); nothing was loaded");
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const checkpoint_tensor& t = layout[i];
    if (!t.held) continue;
    if (t.at != nullptr) std::memcpy(t.at, staged[i].data(), staged[i].size());
    for (std::byte* c : t.copies) std::memcpy(c, staged[i].data(), staged[i].size());
  }
  optimizer_access::parameters_to_device(opt);  // (a device model: from the host copies)
  return h;
}

}  // namespace detail

/// Writes opt's model parameters, its state and `s` to `file` (see the top of this file).
/// Collective where opt spans processes. Throws checkpoint_error (on every process) where any
/// process could not write its part; `file` is then as it was.
template <model_type Model, class Rule>
void save_checkpoint(const std::string& file, optimizer<Model, Rule>& opt, const training_state& s = {}) {
  using access = detail::optimizer_access;
  const std::string tmp = file + ".tmp";
  std::string failure;
  std::vector<detail::checkpoint_tensor> layout;
  std::string head;
  const std::vector<std::uint64_t> layer_updates = detail::layer_updates_everywhere(opt);  // (collective)
  const auto agree = [&](const char* stage) {
    const int failed = detail::failures_everywhere(opt, !failure.empty());
    if (failed == 0) return;
    if (access::leads(opt)) ::unlink(tmp.c_str());
    if (!failure.empty()) throw checkpoint_error(failure);
    throw checkpoint_error("ctpipe checkpoint " + file + ": another process failed " + stage +
                           " (its error says why); the file is as it was");
  };
  // Each tensor's checksum, from the process that writes it (a sum in which it is the one term
  // that is not 0: exact, as a checksum is below 2^32).
  std::vector<double> sums;
  try {
    access::parameters_to_host(opt);  // (a device model: into the host copies it writes from)
    layout = detail::checkpoint_layout<true>(opt, file);
    sums.assign(layout.size(), 0.0);
    for (std::size_t i = 0; i < layout.size(); ++i)
      if (layout[i].mine)
        sums[i] = safetensors::crc32(
            std::span<const std::byte>(layout[i].at, static_cast<std::size_t>(layout[i].e.end - layout[i].e.begin)));
  } catch (const std::exception& e) {
    failure = e.what();
  }
  agree("to read its tensors");
  access::sum(opt, sums);  // (collective)
  try {
    safetensors::header h;
    for (const auto& t : layout) h.tensors.push_back(t.e);
    h.metadata = detail::checkpoint_metadata(opt, s, layer_updates);
    for (std::size_t i = 0; i < layout.size(); ++i)
      h.metadata[safetensors::tensor_checksum_key(layout[i].e.name)] =
          safetensors::checksum_text(static_cast<std::uint32_t>(sums[i]));
    h.metadata[std::string(safetensors::header_checksum_key)] = "00000000";
    head = detail::stamp_header(safetensors::write_header(h));
    if (access::leads(opt)) {
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) throw checkpoint_error("ctpipe checkpoint " + tmp + ": cannot create it: " + detail::errno_text());
      const auto len = detail::length_bytes(head.size());
      std::string why;
      const std::uint64_t total = 8 + head.size() + h.data_bytes();
      const bool ok = detail::write_at(fd, len.data(), 8, 0, why) &&
                      detail::write_at(fd, reinterpret_cast<const std::byte*>(head.data()), head.size(), 8, why) &&
                      (::ftruncate(fd, static_cast<off_t>(total)) == 0 || (why = detail::errno_text(), false));
      ::close(fd);
      if (!ok) throw checkpoint_error("ctpipe checkpoint " + tmp + ": " + why);
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  agree("to prepare the file");
  try {
    bool any = false;
    for (const auto& t : layout) any = any || t.mine;
    if (any) {
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) throw checkpoint_error("ctpipe checkpoint " + tmp + ": cannot open it: " + detail::errno_text());
      std::string why;
      bool ok = true;
      for (const auto& t : layout)
        if (t.mine && ok)
          ok = detail::write_at(fd, t.at, static_cast<std::size_t>(t.e.end - t.e.begin), 8 + head.size() + t.e.begin,
                                why);
      if (ok && ::fsync(fd) != 0) {
        ok = false;
        why = "fsync: " + detail::errno_text();
      }
      ::close(fd);
      if (!ok) throw checkpoint_error("ctpipe checkpoint " + tmp + ": " + why);
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  agree("to write its tensors");
  try {
    if (access::leads(opt)) {
      if (::rename(tmp.c_str(), file.c_str()) != 0)
        throw checkpoint_error("ctpipe checkpoint " + file + ": renaming " + tmp + " over it: " + detail::errno_text());
      const std::string dir = detail::directory_of(file);
      const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (d >= 0) {
        (void)::fsync(d);
        ::close(d);
      }
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  agree("to rename the file");
}

/// Reads a checkpoint written by save_checkpoint, for this model and rule, at any partition, into
/// opt's model and state, and returns the training state. Collective where opt spans processes.
/// Throws checkpoint_error (on every process), loading nothing, where the file is damaged (a
/// checksum does not match), truncated, or of another model or rule, or has no checksums and `mode`
/// is checksums::required.
template <model_type Model, class Rule>
training_state load_checkpoint(const std::string& file, optimizer<Model, Rule>& opt,
                               checksums mode = checksums::required) {
  using access = detail::optimizer_access;
  const safetensors::header h = detail::load_into<true>(file, opt, mode);
  training_state s;
  s.origin.step = detail::metadata_number(h, "ctpipe.step", file);
  s.origin.first_microbatch = static_cast<int>(detail::metadata_number(h, "ctpipe.first_microbatch", file));
  if (const auto it = h.metadata.find("ctpipe.data"); it != h.metadata.end()) s.data = it->second;
  access::set_updates(opt, detail::metadata_number(h, "ctpipe.updates", file));
  const std::vector<std::uint64_t> per = detail::layer_counts(h, Model::size, file);
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    (
        [&] {
          auto& st = access::layer<K>(opt);
          if constexpr (std::remove_cvref_t<decltype(st)>::updates) st.steps = per[K];
        }(),
        ...);
  }
  (std::make_index_sequence<Model::size>{});
  return s;
}

/// Reads only the parameters of a checkpoint (or of any safetensors file that holds the model's
/// tensors, "layers.<K>.<name>", such as one a PyTorch script wrote) into opt's model: for
/// evaluation, or to start a run from trained weights. Optimizer tensors in the file are skipped.
template <model_type Model, class Rule>
void load_parameters(const std::string& file, optimizer<Model, Rule>& opt, checksums mode = checksums::required) {
  (void)detail::load_into<false>(file, opt, mode);
}

/// Every layer's parameters of a model in one process, without an optimizer (plain SGD's view of
/// it: nothing to save but the tensors).
template <model_type Model>
void save_parameters(const std::string& file, Model& model, const training_state& s = {}) {
  optimizer<Model, sgd> view(model, sgd{});
  save_checkpoint(file, view, s);
}
template <model_type Model>
void load_parameters(const std::string& file, Model& model, checksums mode = checksums::required) {
  optimizer<Model, sgd> view(model, sgd{});
  load_parameters(file, view, mode);
}

}  // namespace ctpipe
