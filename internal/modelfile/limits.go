package modelfile

// Sane limits on a model's shapes, checked before anything is allocated from
// the numbers its files state (a QHexRT manifest, a Genie config, a .pte's
// metadata): n_layers 1e9 or a context of 2^31 is refused with an error
// instead of being allocated until the kernel kills the process. They are
// far above any model a phone runs (Llama-3.2: 16 or 28 layers, 128K
// context, 128K vocabulary).
const (
	MaxLayers  = 1024
	MaxContext = 1 << 17 // 131072 positions, Llama-3.2's longest
	MaxHidden  = 1 << 15
	MaxHeadDim = 1024
	MaxVocab   = 1 << 20
)
