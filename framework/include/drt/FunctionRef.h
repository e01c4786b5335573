//===- drt/FunctionRef.h - A callable passed by reference -------*- C++ -*-===//
//
// For a parameter that a call invokes before it returns and never keeps: a
// FunctionRef holds the address of the caller's callable and a function that
// calls it, so that passing a lambda costs no allocation and no copy,
// whatever it captures (a std::function allocates for captures of more than
// two pointers). The callable must outlive the FunctionRef: pass a
// temporary lambda straight to the call, never store the reference.
//
//===----------------------------------------------------------------------===//
#ifndef DRT_FUNCTIONREF_H
#define DRT_FUNCTIONREF_H

#include <memory>
#include <type_traits>
#include <utility>

namespace drt {

template <typename Signature> class FunctionRef;

/// A non-owning reference to a callable of signature Ret(Params...).
template <typename Ret, typename... Params> class FunctionRef<Ret(Params...)> {
public:
  /// Refers to \p callable, which must outlive this object.
  template <typename Callable,
            typename = std::enable_if_t<
                !std::is_same_v<std::remove_cvref_t<Callable>, FunctionRef> &&
                std::is_invocable_r_v<Ret, Callable &, Params...>>>
  FunctionRef(Callable &&callable)
      : object_(const_cast<void *>(
            static_cast<const void *>(std::addressof(callable)))),
        call_(&callThrough<std::remove_reference_t<Callable>>) {}

  /// Calls the callable referred to.
  Ret operator()(Params... params) const {
    return call_(object_, std::forward<Params>(params)...);
  }

private:
  template <typename Callable>
  static Ret callThrough(void *object, Params... params) {
    return (*static_cast<Callable *>(object))(std::forward<Params>(params)...);
  }

  void *object_;
  Ret (*call_)(void *, Params...);
};

} // namespace drt

#endif // DRT_FUNCTIONREF_H
