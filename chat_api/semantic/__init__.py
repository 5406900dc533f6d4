"""The semantic data model: Cube-format YAML views, cubes, members, access policies as declared."""
