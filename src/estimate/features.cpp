// Placeholder: implemented with the feature.
#include "estimate/features.h"
