// FlowView: the radial layered view of Attention Flows (DeRose, Wang & Berger 2020), one
// module per mode: flow/single.ts (one model), flow/compare.ts (two models on one input,
// both on flow/traced.ts) and flow/collection.ts (a summary over many inputs).

import { CollectionView } from "./flow/collection";
import { CompareView } from "./flow/compare";
import { SingleView } from "./flow/single";
import { mount } from "./lib/view";
import { Trait } from "./traits.gen";

export default mount((props) => {
  const mode = props.model.get("mode" satisfies Trait<"flow">);
  if (mode === "collection") return new CollectionView(props);
  if (mode === "compare") return new CompareView(props);
  return new SingleView(props);
});
