// InlineVector (core/base/inline_vector.h): the values it holds, inline and
// after it moves to the heap, through copies and moves, as a std::vector
// given the same calls.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "core/base/inline_vector.h"

using ringreduce::InlineVector;

namespace {

template <typename T, size_t N>
std::vector<T> valuesOf(const InlineVector<T, N>& v) {
  return std::vector<T>(v.begin(), v.end());
}

TEST(InlineVector, PushBackKeepsEveryValueInlineAndBeyond) {
  InlineVector<size_t, 4> v;
  std::vector<size_t> expected;
  EXPECT_TRUE(v.empty());
  for (size_t i = 0; i < 11; ++i) {
    v.push_back(i * 7 + 1);
    expected.push_back(i * 7 + 1);
    ASSERT_EQ(valuesOf(v), expected) << "after " << i + 1 << " values";
    EXPECT_GE(v.capacity(), v.size());
  }
  EXPECT_EQ(v.front(), 1u);
  EXPECT_EQ(v.back(), 71u);
  v[3] = 99;
  EXPECT_EQ(v[3], 99u);
}

TEST(InlineVector, PushBackOfItsOwnValueWhileGrowing) {
  InlineVector<int, 2> v{5, 6};
  v.push_back(v[0]);  // the value lies in the inline storage it leaves
  v.push_back(v[2]);
  EXPECT_EQ(valuesOf(v), (std::vector<int>{5, 6, 5, 5}));
}

TEST(InlineVector, CopiesAndMovesInlineAndOnTheHeap) {
  for (size_t count : {size_t{3}, size_t{9}}) {
    InlineVector<size_t, 4> source(count, 42);
    source[0] = 1;
    const std::vector<size_t> expected = valuesOf(source);
    InlineVector<size_t, 4> copy(source);
    EXPECT_EQ(valuesOf(copy), expected);
    copy[1] = 7;  // a copy, not a view
    EXPECT_EQ(source[1], 42u);
    InlineVector<size_t, 4> assigned;
    assigned.push_back(3);
    assigned = source;
    EXPECT_EQ(assigned, source);
    InlineVector<size_t, 4> moved(std::move(assigned));
    EXPECT_EQ(valuesOf(moved), expected);
    EXPECT_TRUE(assigned.empty());  // NOLINT(bugprone-use-after-move): what a move leaves
    InlineVector<size_t, 4> moveAssigned(2, 8);
    moveAssigned = std::move(moved);
    EXPECT_EQ(valuesOf(moveAssigned), expected);
    moveAssigned.push_back(5);  // still usable, wherever its values went
    EXPECT_EQ(moveAssigned.size(), count + 1);
  }
}

TEST(InlineVector, ResizeAssignReserveAndClear) {
  InlineVector<int, 3> v;
  v.resize(2, 4);
  EXPECT_EQ(valuesOf(v), (std::vector<int>{4, 4}));
  v.resize(6, 9);
  EXPECT_EQ(valuesOf(v), (std::vector<int>{4, 4, 9, 9, 9, 9}));
  v.resize(1);
  EXPECT_EQ(valuesOf(v), (std::vector<int>{4}));
  v.reserve(20);
  EXPECT_GE(v.capacity(), 20u);
  EXPECT_EQ(valuesOf(v), (std::vector<int>{4}));
  const std::vector<int> from{1, 2, 3, 4, 5};
  v.assign(from.begin(), from.end());
  EXPECT_EQ(valuesOf(v), from);
  v.clear();
  EXPECT_TRUE(v.empty());
  EXPECT_NE(v, (InlineVector<int, 3>{1}));
}

}  // namespace
