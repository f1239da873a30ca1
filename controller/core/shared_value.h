// SharedValue<T>: an optional T that the copies of its owner share until one
// of them replaces it. A Registry snapshot copies every live job each
// scheduling cycle; the parts of a job that change only now and then (its
// placement, its conditions) are shared by the copies, not copied.
//
// Contract:
//   - reads as a std::optional<T> does (has_value, bool, *, ->), and only
//     reads: the value it points to is never changed in place;
//   - assigning a T (or std::nullopt) replaces the value of this copy only;
//     the other copies keep the one they had;
//   - copies may be read from several threads at once (shared_ptr's count
//     is atomic); one copy is written by one thread at a time, as any value.
#pragma once

#include <memory>
#include <optional>
#include <utility>

namespace controller {

template <class T>
class SharedValue {
 public:
  SharedValue() = default;
  SharedValue(std::nullopt_t) {}
  SharedValue(T v) : p_(std::make_shared<const T>(std::move(v))) {}
  SharedValue& operator=(std::nullopt_t) {
    p_.reset();
    return *this;
  }
  SharedValue& operator=(T v) {
    p_ = std::make_shared<const T>(std::move(v));
    return *this;
  }

  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return has_value(); }
  // Require has_value().
  const T& operator*() const { return *p_; }
  const T* operator->() const { return p_.get(); }
  // True when both hold the very same value (one assignment's), or none:
  // what was made from one may serve the other.
  bool same(const SharedValue& o) const { return p_ == o.p_; }

 private:
  std::shared_ptr<const T> p_;
};

}  // namespace controller
