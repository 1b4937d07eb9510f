// CircuitView: a circuit (or two compared) as a layered graph of components; see lib/layeredview.ts.

import { LayeredView } from "./lib/layeredview";
import { mount } from "./lib/view";

export default mount((props) => new LayeredView(props, "circuit"));
