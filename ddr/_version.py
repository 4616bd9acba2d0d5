"""ddr's version, in a module of its own: what ddr writes records it, and importing the
package root (which wires the layers together) for it would tie the writers to the root."""

__version__ = "0.1.0"
