// Placeholder: implemented with the feature.
