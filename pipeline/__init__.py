"""mcprm's pipeline. ``pipeline.label_dataset`` (Ray Data in and out) is imported on first use: ``import
pipeline`` stays free of ray."""


def __getattr__(name: str):
    if name == "label_dataset":
        from pipeline.ray_data import label_dataset

        return label_dataset
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
