"""The CT task: 3D volume classification on MedMNIST 3D or your own NIfTI/DICOM volumes (training:
:mod:`~bioattn.tasks.ct.train`, prediction: :mod:`~bioattn.tasks.ct.predict`, explanation:
:mod:`~bioattn.tasks.ct.explain`)."""
