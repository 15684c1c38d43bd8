// Placeholder: filled in with the feature.
#include <gtest/gtest.h>
