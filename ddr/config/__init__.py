"""YAML files as data: safe round-trip loading with line and column for every value, --set
overrides and ${params.x} interpolation, pydantic validation with every problem reported as
``file:line:col: message``. Used by pipeline files and cluster configs."""
