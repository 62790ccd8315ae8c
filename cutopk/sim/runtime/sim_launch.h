// cutopk CPU simulator: what a module's table of kernels needs, compiled after the kernel source
// (each kernel's signature, its call from an array of arguments, the scheduler's entry point run()).
// The Python loader appends the table of kernels and cutopk_sim_launch below this file; the
// scheduler itself is sim_scheduler.cpp (with its parts), compiled once into objects that every module links.
#pragma once

#pragma GCC visibility push(hidden)
namespace cutopk_sim {

// The signature of a kernel, read off its function type by the compiler: for each parameter a
// kind letter ('p' pointer, 'i' signed integer, 'u' unsigned integer, 'f' floating point, 'h'
// half, 'b' bfloat16, 'B' bool, '?' other) and its size in bytes.
template <class T>
constexpr char kind_of() {
  if constexpr (std::is_enum_v<T>) return kind_of<std::underlying_type_t<T>>();
  else if constexpr (std::is_pointer_v<T>) return 'p';
  else if constexpr (std::is_same_v<T, bool>) return 'B';
  else if constexpr (std::is_same_v<T, __half>) return 'h';
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return 'b';
  else if constexpr (std::is_floating_point_v<T>) return 'f';
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return 'i';
  else if constexpr (std::is_integral_v<T>) return 'u';
  else return '?';
}

template <class T, class = void>
struct is_complete : std::false_type {};
template <class T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

// What a pointer parameter points to (cv-qualifiers dropped): a kind letter as above, or 'v'
// void and 'c' plain char (raw memory: any element type), 'r' a struct, class or union (other
// than __half and __nv_bfloat16), 'p' a pointer.
template <class T>
constexpr char pointee_kind() {
  if constexpr (std::is_void_v<T>) return 'v';
  else if constexpr (std::is_same_v<T, char>) return 'c';
  else if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) return kind_of<T>();
  else if constexpr (std::is_class_v<T> || std::is_union_v<T>) return 'r';
  else return kind_of<T>();
}

template <class T>
constexpr unsigned long long size_of() {
  if constexpr (std::is_function_v<T> || !is_complete<T>::value) return 0;
  else return sizeof(T);
}

template <class T>
constexpr unsigned long long align_of() {
  if constexpr (std::is_function_v<T> || !is_complete<T>::value) return 1;
  else return alignof(T);
}

// The type as the compiler spells it, inside the function's pretty name ("... [with T = const
// float*]" for GCC, "... [T = const float *]" for Clang); Python cuts it out.
template <class T>
const char* type_name() {
  return __PRETTY_FUNCTION__;
}

// One kernel parameter, for the launch-argument checks in Python (cutopk/sim/_library.py mirrors
// this layout with ctypes).
struct ParamInfo {
  char kind;                          // kind_of the parameter
  char pointee;                       // for a pointer: pointee_kind of its element, else 0
  unsigned long long size;            // sizeof the parameter
  unsigned long long pointee_size;    // sizeof the element (0: void, a function, incomplete)
  unsigned long long pointee_align;   // alignof the element (1 when unknown)
  const char* type;                   // type_name of the parameter
};

template <class T>
ParamInfo param_info() {
  using E = std::remove_cv_t<std::remove_pointer_t<T>>;
  constexpr bool ptr = std::is_pointer_v<T>;
  return ParamInfo{kind_of<T>(), ptr ? pointee_kind<E>() : '\0', sizeof(T), ptr ? size_of<E>() : 0,
                   ptr ? align_of<E>() : 1, type_name<T>()};
}

template <class... A>
int describe(void (*)(A...), ParamInfo* out, int capacity) {
  constexpr int n = sizeof...(A);
  const ParamInfo info[] = {param_info<std::decay_t<A>>()..., ParamInfo{}};
  for (int i = 0; i < n && i < capacity; ++i) out[i] = info[i];
  return n;
}

// Calls a kernel with its arguments taken from an array of pointers to each value, as CUDA's
// cuLaunchKernel takes them.
template <class... A, size_t... I>
void invoke_with(void (*f)(A...), void** args, std::index_sequence<I...>) {
  f(*static_cast<std::decay_t<A>*>(args[I])...);
}

template <class... A>
void invoke(void (*f)(A...), void** args) {
  invoke_with(f, args, std::index_sequence_for<A...>{});
}

struct KernelEntry {
  void (*launch)(void**);
  int (*describe)(ParamInfo*, int);
};

// Runs a launch of `entry` (a kernel of the table, called with `args`) to its end or its first fault;
// returns an ErrorCode, with the message in cutopk_sim_error() (sim_scheduler.cpp).
int run(void (*entry)(void**), void** args, dim3 grid, dim3 block, size_t dynamic_bytes, int resident,
        unsigned long long seed, unsigned long long block_seed, int poison, unsigned long long spin_budget,
        double watchdog_s);

}  // namespace cutopk_sim
#pragma GCC visibility pop
