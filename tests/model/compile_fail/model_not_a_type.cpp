// build error: ctpipe::model: this layer is not a layer: it needs member types input_type and output_type
// build output under: 8000 bytes
// build error: layer_check<0, int>
#include <ctpipe/ctpipe.hpp>
ctpipe::model<int> n;
